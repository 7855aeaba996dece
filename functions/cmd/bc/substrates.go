package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/better-compute/kubernetes/shared/client"
)

// substrateFlags are the flags and arguments setting the fields of the
// substrates' requests, by JSON path.
var substrateFlags = map[string]string{
	"tenantId": "--tenant", "substrateId": "SUBSTRATE_ID", "poolId": "--pool", "pool": "-f",
}

func (a *app) substratesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "substrates",
		Aliases: []string{"substrate"},
		Short:   "Show pools' substrates and the nodes that joined them",
		Long: "A pool whose policy asks for a Kubernetes substrate gets one from the pools module's events, without any call:\n" +
			"bc reads them. A substrate's cluster and node pools are listed by bc clusters and bc nodepools too,\n" +
			"with managedBy set; they cannot be changed there.",
	}
	cmd.AddCommand(a.substratesGet(), a.substratesList(), a.substratesNodes(), a.substratesPlan())
	return cmd
}

func (a *app) substratesGet() *cobra.Command {
	var w waitFlags
	cmd := &cobra.Command{
		Use:   "get SUBSTRATE_ID",
		Short: "Show a substrate",
		Args:  oneArg("SUBSTRATE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tenant, c, err := a.tenantClient()
			if err != nil {
				return err
			}
			start := time.Now()
			s, err := c.GetSubstrate(a.ctx, tenant, args[0])
			if err != nil {
				return apiErr(err, substrateFlags)
			}
			print := func(s *client.Substrate) error {
				return a.print(s, substrateHeader, [][]string{substrateRow(*s, time.Now())})
			}
			if w.wait {
				// A substrate follows its pool's events: there is nothing
				// to call, only to wait for.
				return waitAndPrint(a, "substrate of pool "+s.PoolID, w.timeout, start,
					func(ctx context.Context, opts *client.WaitOptions) (*client.Substrate, error) {
						return c.WaitSubstrate(ctx, tenant, s.ID, client.StateReady, opts)
					}, print)
			}
			return print(s)
		},
	}
	w.add(cmd, "substrate is ready")
	return cmd
}

func (a *app) substratesList() *cobra.Command {
	var poolID string
	cmd := &cobra.Command{
		Use:   "list [--pool POOL_ID]",
		Short: "List the tenant's substrates, oldest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tenant, c, err := a.tenantClient()
			if err != nil {
				return err
			}
			list, err := c.ListSubstrates(a.ctx, tenant, poolID)
			if err != nil {
				return apiErr(err, substrateFlags)
			}
			var rows [][]string
			for _, s := range list {
				rows = append(rows, substrateRow(s, time.Now()))
			}
			return a.print(map[string]any{"substrates": list}, substrateHeader, rows)
		},
	}
	cmd.Flags().StringVar(&poolID, "pool", "", "only the substrate of this pool")
	return cmd
}

func (a *app) substratesNodes() *cobra.Command {
	return &cobra.Command{
		Use:   "nodes SUBSTRATE_ID",
		Short: "List the nodes that joined a substrate, by name",
		Args:  oneArg("SUBSTRATE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tenant, c, err := a.tenantClient()
			if err != nil {
				return err
			}
			nodes := []client.SubstrateNode{}
			var rows [][]string
			for n, err := range c.AllSubstrateNodes(a.ctx, tenant, args[0]) {
				if err != nil {
					return apiErr(err, substrateFlags)
				}
				nodes = append(nodes, n)
				rows = append(rows, substrateNodeRow(n, time.Now()))
			}
			// Every page read: the list is its own last page.
			return a.print(client.SubstrateNodeList{Nodes: nodes}, substrateNodeHeader, rows)
		},
	}
}

func (a *app) substratesPlan() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "plan -f POOL_JSON",
		Short: "Show what a pool's substrate would do for the pool, action by action, changing nothing",
		Long: "POOL_JSON (a file, or - for stdin) is the pool as the pools module's compute.pool.updated event carries it:\n" +
			"{\"id\", \"tenantId\", \"version\", \"policy\": {\"substrate\": ...}, \"flavors\": [...]}.\n" +
			"The answer is computed by the planner the reconciler runs; nothing is recorded or changed.\n" +
			"Actions: createCluster, adoptCluster, createNodePool, resizeNodePool, replaceNodePool (the new node pool\n" +
			"is made first, the old one deleted once the new one's nodes joined), deleteNodePool, applyObjects,\n" +
			"teardown, none (nothing to change, or the error the substrate would show).",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var pool []byte
			var err error
			if file == "-" {
				pool, err = io.ReadAll(os.Stdin)
			} else {
				pool, err = os.ReadFile(file)
			}
			if err != nil {
				return fmt.Errorf("read the pool: %w", err)
			}
			if !json.Valid(pool) {
				return fmt.Errorf("%s is not JSON", file)
			}
			tenant, c, err := a.tenantClient()
			if err != nil {
				return err
			}
			plan, err := c.PlanSubstrate(a.ctx, tenant, pool)
			if err != nil {
				return apiErr(err, substrateFlags)
			}
			var rows [][]string
			for _, act := range plan.Actions {
				rows = append(rows, planRow(act))
			}
			return a.print(plan, planHeader, rows)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the pool, as JSON (- for stdin)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

var planHeader = []string{"ACTION", "NODE POOL", "FLAVOR", "FROM", "TO", "REASON"}

func planRow(a client.PlanAction) []string {
	return []string{a.Action, orDash(a.NodePool), orDash(a.Flavor), orDash(fields(a.From)), orDash(fields(a.To)), a.Reason}
}

// fields shows what of a node pool a plan's action changes: k=v, by key.
func fields(m map[string]any) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, _ := json.Marshal(m[k])
		out = append(out, k+"="+strings.Trim(string(v), `"`))
	}
	return strings.Join(out, ",")
}

var substrateHeader = []string{"POOL", "ID", "MODE", "CLUSTER", "NODE POOLS", "NODES", "STATE", "AGE", "MESSAGE"}

func substrateRow(s client.Substrate, now time.Time) []string {
	var pools []string
	for _, p := range s.NodePools {
		pools = append(pools, p.Flavor+"="+string(p.State))
	}
	return []string{s.PoolID, s.ID, s.Mode, orDash(s.ClusterID), orDash(strings.Join(pools, ",")), fmt.Sprint(s.JoinedNodes),
		string(s.State), age(s.CreatedAt, now), s.Message}
}

var substrateNodeHeader = []string{"NAME", "FLAVOR", "ZONE", "PROVIDER ID", "JOINED"}

func substrateNodeRow(n client.SubstrateNode, now time.Time) []string {
	return []string{n.Name, n.Flavor, orDash(n.Zone), orDash(n.ProviderID), age(n.JoinedAt, now)}
}
