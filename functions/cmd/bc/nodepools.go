package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/better-compute/kubernetes/shared/client"
)

// poolFlags are the flags setting the fields of a node pool, by JSON path.
var poolFlags = map[string]string{
	"tenantId": "--tenant", "clusterId": "--cluster", "nodePoolId": "NODEPOOL_ID",
	"name": "--name", "machineType": "--machine-type", "nodeCount": "--nodes",
	"autoscaling": "--min-nodes/--max-nodes", "autoscaling.minNodes": "--min-nodes", "autoscaling.maxNodes": "--max-nodes",
	"diskGiB": "--disk-gib", "diskType": "--disk-type", "spot": "--spot", "accelerators": "--accelerator",
	"zones": "--zones", "labels": "--labels", "taints": "--taints", "idempotencyKey": "--idempotency-key",
}

// specFlags are the flags of a node pool spec.
type specFlags struct {
	name, machineType, diskType, accelerator, zones, labels, taints string
	nodes, minNodes, maxNodes, diskGiB                              int
	spot                                                            bool
}

func (s *specFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.name, "name", "", "node pool name (also its provider-side name)")
	f.StringVar(&s.machineType, "machine-type", "", "the provider's machine type (e2-standard-4)")
	f.IntVar(&s.nodes, "nodes", 0, "nodes per zone (with autoscaling: the initial count)")
	f.IntVar(&s.minNodes, "min-nodes", -1, "autoscaling: fewest nodes per zone (with --max-nodes)")
	f.IntVar(&s.maxNodes, "max-nodes", -1, "autoscaling: most nodes per zone (with --min-nodes)")
	f.IntVar(&s.diskGiB, "disk-gib", 0, "boot disk size in GiB (10 to 65536)")
	f.StringVar(&s.diskType, "disk-type", "", "boot disk type (pd-balanced)")
	f.BoolVar(&s.spot, "spot", false, "spot VMs")
	f.StringVar(&s.accelerator, "accelerator", "", "GPUs per node: type=nvidia-l4,count=1")
	f.StringVar(&s.zones, "zones", "", "zones, comma-separated (of the cluster's region)")
	f.StringVar(&s.labels, "labels", "", "Kubernetes labels: key=value,...")
	f.StringVar(&s.taints, "taints", "", "Kubernetes taints: key=value:Effect,... (Effect: NoSchedule, PreferNoSchedule, NoExecute)")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("machine-type")
	_ = cmd.MarkFlagRequired("nodes")
}

func (s *specFlags) spec() (client.NodePoolSpec, error) {
	spec := client.NodePoolSpec{Name: s.name, MachineType: s.machineType, NodeCount: s.nodes, DiskGiB: s.diskGiB, DiskType: s.diskType, Spot: s.spot}
	as, err := autoscaling(s.minNodes, s.maxNodes)
	if err != nil {
		return spec, err
	}
	spec.Autoscaling = as
	if s.accelerator != "" {
		kv, err := keyValues("--accelerator", s.accelerator)
		if err != nil {
			return spec, err
		}
		n, err := strconv.Atoi(kv["count"])
		if kv["type"] == "" || err != nil || len(kv) != 2 {
			return spec, &usageError{fmt.Errorf("--accelerator %q: want type=TYPE,count=N", s.accelerator)}
		}
		spec.Accelerators = &client.Accelerators{Type: kv["type"], Count: n}
	}
	if s.zones != "" {
		spec.Zones = strings.Split(s.zones, ",")
	}
	if spec.Labels, err = keyValues("--labels", s.labels); err != nil {
		return spec, err
	}
	if s.taints != "" {
		for _, t := range strings.Split(s.taints, ",") {
			kv, effect, ok := strings.Cut(t, ":")
			k, v, _ := strings.Cut(kv, "=")
			if !ok {
				return spec, &usageError{fmt.Errorf("--taints %q: want key[=value]:Effect,...", s.taints)}
			}
			spec.Taints = append(spec.Taints, client.Taint{Key: k, Value: v, Effect: effect})
		}
	}
	return spec, nil
}

func autoscaling(minNodes, maxNodes int) (*client.Autoscaling, error) {
	switch {
	case minNodes < 0 && maxNodes < 0:
		return nil, nil
	case minNodes < 0 || maxNodes < 0:
		return nil, &usageError{errors.New("--min-nodes and --max-nodes go together")}
	}
	return &client.Autoscaling{MinNodes: minNodes, MaxNodes: maxNodes}, nil
}

// apiErr attaches the flags of the fields to an INVALID_INPUT.
func apiErr(err error, flags map[string]string) error {
	var ce *client.Error
	if errors.As(err, &ce) && len(ce.Details) > 0 {
		return &fieldsError{err: ce, flags: flags}
	}
	return err
}

func (a *app) nodePoolsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "nodepools", Aliases: []string{"nodepool", "np"}, Short: "Create, list, resize and delete the node pools of a cluster"}
	cmd.AddCommand(a.nodePoolsCreate(), a.nodePoolsList(), a.nodePoolsUpdate(), a.nodePoolsDelete())
	return cmd
}

// waitFlags are --wait and --timeout.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func (w *waitFlags) add(cmd *cobra.Command, what string) {
	cmd.Flags().BoolVar(&w.wait, "wait", false, "wait until the "+what+", printing each state change")
	cmd.Flags().DurationVar(&w.timeout, "timeout", 30*time.Minute, "with --wait: give up after this long (exit 10)")
}

func (a *app) nodePoolsCreate() *cobra.Command {
	var (
		spec      specFlags
		clusterID string
		key       string
		w         waitFlags
	)
	cmd := &cobra.Command{
		Use:     "create --cluster CLUSTER_ID --name NAME --machine-type TYPE --nodes N",
		Short:   "Add a node pool to a standard cluster",
		Example: "  bc nodepools create --cluster kcl_... --name gpu --machine-type g2-standard-8 --nodes 2 \\\n      --accelerator type=nvidia-l4,count=1 --taints gpu=true:NoSchedule --wait",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tenant, err := a.needTenant()
			if err != nil {
				return err
			}
			s, err := spec.spec()
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			start := time.Now()
			p, err := c.CreateNodePool(a.ctx, client.CreateNodePoolRequest{TenantID: tenant, ClusterID: clusterID, NodePoolSpec: s, IdempotencyKey: key})
			if err != nil {
				return apiErr(err, poolFlags)
			}
			if w.wait {
				return a.waitPool(c, tenant, p, client.StateReady, w.timeout, start)
			}
			return a.printPool(p)
		},
	}
	spec.add(cmd)
	cmd.Flags().StringVar(&clusterID, "cluster", "", "the cluster's ID (kcl_...)")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "a key making a retry of this create return the same pool (one is made when empty)")
	_ = cmd.MarkFlagRequired("cluster")
	w.add(cmd, "node pool is ready")
	return cmd
}

// waitPool waits for the pool to reach target, then prints it.
func (a *app) waitPool(c *client.Client, tenant string, p *client.NodePool, target client.State, timeout time.Duration, start time.Time) error {
	return waitAndPrint(a, "node pool "+p.Name, timeout, start, func(ctx context.Context, opts *client.WaitOptions) (*client.NodePool, error) {
		return c.WaitNodePool(ctx, tenant, p.ClusterID, p.ID, target, opts)
	}, a.printPool)
}

func (a *app) printPool(p *client.NodePool) error {
	return a.print(p, nodePoolHeader, [][]string{nodePoolRow(*p, time.Now())})
}

func (a *app) nodePoolsList() *cobra.Command {
	var clusterID string
	cmd := &cobra.Command{
		Use:   "list --cluster CLUSTER_ID",
		Short: "List a cluster's node pools",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tenant, c, err := a.tenantClient()
			if err != nil {
				return err
			}
			pools, err := c.ListNodePools(a.ctx, tenant, clusterID)
			if err != nil {
				return apiErr(err, poolFlags)
			}
			rows := make([][]string, len(pools))
			for i, p := range pools {
				rows[i] = nodePoolRow(p, time.Now())
			}
			if pools == nil {
				pools = []client.NodePool{}
			}
			return a.print(map[string]any{"nodePools": pools}, nodePoolHeader, rows)
		},
	}
	cmd.Flags().StringVar(&clusterID, "cluster", "", "the cluster's ID (kcl_...)")
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}

func (a *app) nodePoolsUpdate() *cobra.Command {
	var (
		clusterID          string
		nodes              int
		minNodes, maxNodes int
		noAutoscaling      bool
		w                  waitFlags
	)
	cmd := &cobra.Command{
		Use:     "update NODEPOOL_ID --cluster CLUSTER_ID [--nodes N] [--min-nodes N --max-nodes N | --no-autoscaling]",
		Short:   "Resize a node pool",
		Example: "  bc nodepools update knp_... --cluster kcl_... --nodes 3 --wait",
		Args:    oneArg("NODEPOOL_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tenant, err := a.needTenant()
			if err != nil {
				return err
			}
			req := client.UpdateNodePoolRequest{TenantID: tenant, ClusterID: clusterID, NodePoolID: args[0], DisableAutoscaling: noAutoscaling}
			if cmd.Flags().Changed("nodes") {
				req.NodeCount = &nodes
			}
			if req.Autoscaling, err = autoscaling(minNodes, maxNodes); err != nil {
				return err
			}
			if noAutoscaling && req.Autoscaling != nil {
				return &usageError{errors.New("--no-autoscaling and --min-nodes/--max-nodes exclude each other")}
			}
			if req.NodeCount == nil && req.Autoscaling == nil && !noAutoscaling {
				return &usageError{errors.New("give --nodes, --min-nodes and --max-nodes, or --no-autoscaling")}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			start := time.Now()
			p, err := c.UpdateNodePool(a.ctx, req)
			if err != nil {
				return apiErr(err, poolFlags)
			}
			if w.wait {
				return a.waitPool(c, tenant, p, client.StateReady, w.timeout, start)
			}
			return a.printPool(p)
		},
	}
	cmd.Flags().StringVar(&clusterID, "cluster", "", "the cluster's ID (kcl_...)")
	cmd.Flags().IntVar(&nodes, "nodes", 0, "nodes per zone")
	cmd.Flags().IntVar(&minNodes, "min-nodes", -1, "autoscaling: fewest nodes per zone (with --max-nodes)")
	cmd.Flags().IntVar(&maxNodes, "max-nodes", -1, "autoscaling: most nodes per zone (with --min-nodes)")
	cmd.Flags().BoolVar(&noAutoscaling, "no-autoscaling", false, "turn autoscaling off")
	_ = cmd.MarkFlagRequired("cluster")
	w.add(cmd, "node pool is ready again")
	return cmd
}

func (a *app) nodePoolsDelete() *cobra.Command {
	var (
		clusterID string
		w         waitFlags
	)
	cmd := &cobra.Command{
		Use:   "delete NODEPOOL_ID --cluster CLUSTER_ID",
		Short: "Delete a node pool",
		Args:  oneArg("NODEPOOL_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tenant, c, err := a.tenantClient()
			if err != nil {
				return err
			}
			start := time.Now()
			p, err := c.DeleteNodePool(a.ctx, tenant, clusterID, args[0])
			if err != nil {
				return apiErr(err, poolFlags)
			}
			if w.wait {
				return a.waitPool(c, tenant, p, client.StateDeleted, w.timeout, start)
			}
			return a.printPool(p)
		},
	}
	cmd.Flags().StringVar(&clusterID, "cluster", "", "the cluster's ID (kcl_...)")
	_ = cmd.MarkFlagRequired("cluster")
	w.add(cmd, "node pool is deleted")
	return cmd
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return &usageError{fmt.Errorf("unexpected argument %q", args[0])}
	}
	return nil
}

func oneArg(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return &usageError{fmt.Errorf("want one argument, %s; got %d", name, len(args))}
		}
		return nil
	}
}
