package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/better-compute/kubernetes/shared/client"
)

// clusterFlags are the flags setting the fields of a cluster, by JSON path.
var clusterFlags = map[string]string{
	"tenantId": "--tenant", "clusterId": "CLUSTER_ID", "poolId": "--pool", "name": "--name", "mode": "--mode",
	"region": "--region", "releaseChannel": "--release-channel", "labels": "--labels", "nodePools": "--node-pool",
	"idempotencyKey": "--idempotency-key", "pageSize": "--page-size",
}

func (a *app) clustersCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "clusters", Aliases: []string{"cluster"}, Short: "Create, get, list and delete clusters"}
	cmd.AddCommand(a.clustersCreate(), a.clustersGet(), a.clustersList(), a.clustersDelete())
	return cmd
}

// nodePoolKeys are the keys of --node-pool.
const nodePoolKeys = "name, machine-type, nodes, min-nodes, max-nodes, disk-gib, disk-type, spot, accelerator-type, accelerator-count, zones (separated by ';')"

// parseNodePool parses one --node-pool: key=value,...
func parseNodePool(s string) (client.NodePoolSpec, error) {
	var spec client.NodePoolSpec
	kv, err := keyValues("--node-pool", s)
	if err != nil {
		return spec, err
	}
	minNodes, maxNodes := -1, -1
	var acc client.Accelerators
	bad := func(k string) error {
		return &usageError{fmt.Errorf("--node-pool %q: bad %s %q (keys: %s)", s, k, kv[k], nodePoolKeys)}
	}
	atoi := func(k string, dst *int) error {
		n, err := strconv.Atoi(kv[k])
		if err != nil {
			return bad(k)
		}
		*dst = n
		return nil
	}
	for _, k := range sortedKeys(kv) {
		v := kv[k]
		switch k {
		case "name":
			spec.Name = v
		case "machine-type":
			spec.MachineType = v
		case "disk-type":
			spec.DiskType = v
		case "zones":
			spec.Zones = strings.Split(v, ";")
		case "accelerator-type":
			acc.Type = v
		case "spot":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return spec, bad(k)
			}
			spec.Spot = b
		case "nodes":
			err = atoi(k, &spec.NodeCount)
		case "min-nodes":
			err = atoi(k, &minNodes)
		case "max-nodes":
			err = atoi(k, &maxNodes)
		case "disk-gib":
			err = atoi(k, &spec.DiskGiB)
		case "accelerator-count":
			err = atoi(k, &acc.Count)
		default:
			return spec, &usageError{fmt.Errorf("--node-pool %q: unknown key %q (keys: %s)", s, k, nodePoolKeys)}
		}
		if err != nil {
			return spec, err
		}
	}
	if spec.Autoscaling, err = autoscaling(minNodes, maxNodes); err != nil {
		return spec, err
	}
	if acc != (client.Accelerators{}) {
		spec.Accelerators = &acc
	}
	return spec, nil
}

func (a *app) clustersCreate() *cobra.Command {
	var (
		req       client.CreateClusterRequest
		nodePools []string
		labels    string
		fromFile  string
		w         waitFlags
	)
	cmd := &cobra.Command{
		Use:   "create --name NAME --pool POOL_ID --region REGION --node-pool name=...,machine-type=...,nodes=N",
		Short: "Create a managed Kubernetes cluster",
		Example: "  bc clusters create --name prod --pool pool-dev --region us-central1 \\\n" +
			"      --node-pool name=default,machine-type=e2-standard-4,nodes=1 --wait\n" +
			"  bc clusters create --name auto --pool pool-dev --region us-central1 --mode autopilot\n" +
			"  bc clusters create --from-file cluster.json   # the API's request body",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if fromFile != "" {
				b, err := os.ReadFile(fromFile)
				if err != nil {
					return err
				}
				dec := json.NewDecoder(bytes.NewReader(b))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&req); err != nil {
					return &usageError{fmt.Errorf("--from-file %s: %w", fromFile, err)}
				}
			}
			if req.TenantID == "" {
				tenant, err := a.needTenant()
				if err != nil {
					return err
				}
				req.TenantID = tenant
			}
			for _, s := range nodePools {
				spec, err := parseNodePool(s)
				if err != nil {
					return err
				}
				req.NodePools = append(req.NodePools, spec)
			}
			if labels != "" {
				l, err := keyValues("--labels", labels)
				if err != nil {
					return err
				}
				req.Labels = l
			}
			if req.Mode == "" {
				req.Mode = client.ModeStandard
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			start := time.Now()
			cl, err := c.CreateCluster(a.ctx, req)
			if err != nil {
				return apiErr(err, clusterFlags)
			}
			if w.wait {
				return a.waitCluster(c, cl, client.StateReady, w.timeout, start)
			}
			return a.printCluster(cl)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Name, "name", "", "cluster name, unique in the tenant")
	f.StringVar(&req.PoolID, "pool", "", "the provider pool (its account hosts the cluster)")
	f.StringVar(&req.Region, "region", "", "a region of the pool's account (us-central1)")
	f.StringVar(&req.Mode, "mode", "", "standard (default) or autopilot")
	f.StringVar(&req.ReleaseChannel, "release-channel", "", "rapid, regular (default) or stable")
	f.StringArrayVar(&nodePools, "node-pool", nil, "a node pool of a standard cluster (repeat for more): "+nodePoolKeys)
	f.StringVar(&labels, "labels", "", "labels: key=value,...")
	f.StringVar(&req.IdempotencyKey, "idempotency-key", "", "a key making a retry of this create return the same cluster (one is made when empty)")
	f.StringVar(&fromFile, "from-file", "", "read the request body (JSON, as the API takes it) from a file; flags add to it")
	w.add(cmd, "cluster is ready")
	return cmd
}

// waitCluster waits for the cluster to reach target, then prints it.
func (a *app) waitCluster(c *client.Client, cl *client.Cluster, target client.State, timeout time.Duration, start time.Time) error {
	return waitAndPrint(a, "cluster "+cl.Name, timeout, start, func(ctx context.Context, opts *client.WaitOptions) (*client.Cluster, error) {
		return c.WaitCluster(ctx, cl.TenantID, cl.ID, target, opts)
	}, a.printCluster)
}

func (a *app) printCluster(cl *client.Cluster) error {
	return a.print(cl, clusterHeader, [][]string{clusterRow(*cl, time.Now())})
}

func (a *app) clustersGet() *cobra.Command {
	return &cobra.Command{
		Use:   "get CLUSTER_ID",
		Short: "Show a cluster",
		Args:  oneArg("CLUSTER_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tenant, c, err := a.tenantClient()
			if err != nil {
				return err
			}
			cl, err := c.GetCluster(a.ctx, tenant, args[0])
			if err != nil {
				return apiErr(err, clusterFlags)
			}
			return a.printCluster(cl)
		},
	}
}

func (a *app) clustersList() *cobra.Command {
	var poolID string
	cmd := &cobra.Command{
		Use:   "list [--pool POOL_ID]",
		Short: "List the tenant's clusters, newest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tenant, c, err := a.tenantClient()
			if err != nil {
				return err
			}
			clusters := []client.Cluster{}
			var rows [][]string
			for cl, err := range c.AllClusters(a.ctx, tenant, poolID) {
				if err != nil {
					return apiErr(err, clusterFlags)
				}
				clusters = append(clusters, cl)
				rows = append(rows, clusterRow(cl, time.Now()))
			}
			return a.print(map[string]any{"clusters": clusters}, clusterHeader, rows)
		},
	}
	cmd.Flags().StringVar(&poolID, "pool", "", "only the clusters of this provider pool")
	return cmd
}

func (a *app) clustersDelete() *cobra.Command {
	var w waitFlags
	cmd := &cobra.Command{
		Use:   "delete CLUSTER_ID",
		Short: "Delete a cluster and its node pools",
		Args:  oneArg("CLUSTER_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tenant, c, err := a.tenantClient()
			if err != nil {
				return err
			}
			start := time.Now()
			cl, err := c.DeleteCluster(a.ctx, tenant, args[0])
			if err != nil {
				return apiErr(err, clusterFlags)
			}
			if w.wait {
				return a.waitCluster(c, cl, client.StateDeleted, w.timeout, start)
			}
			return a.printCluster(cl)
		},
	}
	w.add(cmd, "cluster is deleted")
	return cmd
}
