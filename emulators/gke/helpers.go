package gke

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
)

// Cluster returns a copy of the cluster named
// projects/P/locations/L/clusters/C, as GetCluster would.
func (s *Server) Cluster(name string) (*containerpb.Cluster, error) {
	g := s.GServer
	k, pool, err := parseNameArg(name)
	if err != nil || pool != "" {
		return nil, fmt.Errorf("gke: Cluster(%q): not a cluster name", name)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.settle()
	c, err := g.cluster(k)
	if err != nil {
		return nil, fmt.Errorf("gke: Cluster(%q): %w", name, err)
	}
	return clusterOut(c), nil
}

// NodePool returns a copy of the node pool named
// projects/P/locations/L/clusters/C/nodePools/NP, as GetNodePool would.
func (s *Server) NodePool(name string) (*containerpb.NodePool, error) {
	var out *containerpb.NodePool
	err := s.withPool("NodePool", name, func(c *cluster, np *nodePool) error {
		out = poolOut(c, np)
		return nil
	})
	return out, err
}

// NodeCounts returns the node pool's current nodes per zone. GKE itself
// only shows them through the pool's instance groups; the API's
// initial_node_count is the size created or last set, which the
// autoscaler and ResizeNodePool do not change.
func (s *Server) NodeCounts(name string) (map[string]int32, error) {
	var out map[string]int32
	err := s.withPool("NodeCounts", name, func(_ *cluster, np *nodePool) error {
		out = maps.Clone(np.nodes)
		return nil
	})
	return out, err
}

// Operations returns copies of every operation, oldest first, including
// lost ones.
func (s *Server) Operations() []*containerpb.Operation {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	g.settle()
	var out []*containerpb.Operation
	for _, op := range g.opList {
		out = append(out, opOut(op))
	}
	return out
}

// FailNextOperation makes the next operation started by rpc (such as
// "CreateNodePool") be accepted and then end with an error of code and
// msg. A failed create leaves the cluster or node pool ERROR with msg as
// its status message; any other failed operation leaves the resource as it
// was before the call.
func (s *Server) FailNextOperation(rpc string, code codes.Code, msg string) {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	g.opFaults[rpc] = append(g.opFaults[rpc], rpcStatus(code, "%s", msg))
}

// LoseOperation makes the operation with this ID (its Name) disappear:
// GetOperation answers NOT_FOUND and ListOperations omits it from now on.
// Its work still happens when its time comes, as when GKE garbage-collects
// an operation record.
func (s *Server) LoseOperation(id string) error {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	op := g.ops[id]
	if op == nil {
		return fmt.Errorf("gke: LoseOperation(%q): no such operation", id)
	}
	op.lost = true
	return nil
}

// LoseNextOperations makes the next n operations started by rpc lost as
// soon as the call that starts them returns (see LoseOperation).
func (s *Server) LoseNextOperations(rpc string, n int) {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	g.loseNext[rpc] += n
}

// RemoveNodePool deletes a node pool at once, behind the API's back (as
// someone with console access would). Operations still running on it end
// without effect.
func (s *Server) RemoveNodePool(name string) error {
	return s.withPool("RemoveNodePool", name, func(c *cluster, np *nodePool) error {
		s.GServer.removePool(c, np)
		return nil
	})
}

// ResizeNodePool sets a node pool's nodes per zone at once, behind the
// API's back.
func (s *Server) ResizeNodePool(name string, perZoneCount int32) error {
	if perZoneCount < 0 || perZoneCount > maxNodesPerZone {
		return fmt.Errorf("gke: ResizeNodePool(%q, %d): count out of range [0, %d]", name, perZoneCount, maxNodesPerZone)
	}
	return s.withPool("ResizeNodePool", name, func(_ *cluster, np *nodePool) error {
		np.nodes = perZone(np.pb.Locations, perZoneCount)
		return nil
	})
}

// Autoscale moves a node pool's nodes to perZoneCount in each of its
// zones, as the cluster autoscaler would: only with autoscaling enabled
// and within its bounds, per zone or, for total bounds, the pool's sum
// over its zones.
func (s *Server) Autoscale(name string, perZoneCount int32) error {
	return s.autoscale("Autoscale", name, func(np *nodePool) map[string]int32 { return perZone(np.pb.Locations, perZoneCount) })
}

// AutoscaleZones is Autoscale with a count of its own for each of the
// pool's zones (a zone left out keeps its nodes), as the autoscaler
// spreads a pool unevenly under location_policy ANY.
func (s *Server) AutoscaleZones(name string, counts map[string]int32) error {
	return s.autoscale("AutoscaleZones", name, func(np *nodePool) map[string]int32 {
		nodes := maps.Clone(np.nodes)
		maps.Copy(nodes, counts)
		return nodes
	})
}

// autoscale sets the pool's nodes to what target returns, if autoscaling
// allows them.
func (s *Server) autoscale(helper, name string, target func(*nodePool) map[string]int32) error {
	return s.withPool(helper, name, func(_ *cluster, np *nodePool) error {
		a := np.pb.Autoscaling
		if a == nil || !a.Enabled {
			return fmt.Errorf("autoscaling is not enabled")
		}
		nodes := target(np)
		for z, n := range nodes {
			if !slices.Contains(np.pb.Locations, z) {
				return fmt.Errorf("zone %s is not one of the pool's %v", z, np.pb.Locations)
			}
			if n < 0 || n > maxNodesPerZone {
				return fmt.Errorf("count %d in %s out of range [0, %d]", n, z, maxNodesPerZone)
			}
		}
		if why := withinBounds(a, nodes); why != "" {
			return fmt.Errorf("%s", why)
		}
		np.nodes = nodes
		return nil
	})
}

// BreakNodePool puts a node pool in ERROR with msg as its status message,
// as a failed repair or a broken instance group would. The next operation
// on the pool that succeeds makes it RUNNING again.
func (s *Server) BreakNodePool(name, msg string) error {
	return s.withPool("BreakNodePool", name, func(_ *cluster, np *nodePool) error {
		np.pb.Status, np.pb.StatusMessage = containerpb.NodePool_ERROR, msg
		return nil
	})
}

// UpgradeMaster starts the UPGRADE_MASTER operation a release channel
// starts on its own: the cluster is RECONCILING, refuses other operations
// with FAILED_PRECONDITION meanwhile, and reports currentMasterVersion
// version once it ends. It returns the operation's ID. Node pools keep
// their version.
func (s *Server) UpgradeMaster(clusterName, version string) (string, error) {
	return s.UpgradeMasterFor(clusterName, version, 0)
}

// UpgradeMasterFor is UpgradeMaster with an operation that lasts d (the
// server's operation time when d is not positive). An empty version is
// the next one after the cluster's (NextVersion), as a release channel
// would pick.
func (s *Server) UpgradeMasterFor(clusterName, version string, d time.Duration) (string, error) {
	g := s.GServer
	k, pool, err := parseNameArg(clusterName)
	if err != nil || pool != "" {
		return "", fmt.Errorf("gke: UpgradeMaster(%q): not a cluster name", clusterName)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.settle()
	if version == "" {
		c, err := g.cluster(k)
		if err != nil {
			return "", fmt.Errorf("gke: UpgradeMaster(%q): %w", clusterName, err)
		}
		version = NextVersion(c.pb.CurrentMasterVersion)
	}
	op, err := g.upgradeMaster("UpgradeMaster", k, version)
	if err != nil {
		return "", fmt.Errorf("gke: UpgradeMaster(%q, %q): %w", clusterName, version, err)
	}
	if d > 0 {
		op.end = g.now().Add(d)
	}
	return op.pb.Name, nil
}

// withPool runs f on a live node pool with the lock held, after settling.
func (s *Server) withPool(helper, name string, f func(*cluster, *nodePool) error) error {
	g := s.GServer
	k, pool, err := parseNameArg(name)
	if err != nil || pool == "" {
		return fmt.Errorf("gke: %s(%q): not a node pool name", helper, name)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.settle()
	c, np, err := g.pool(poolKey{k, pool})
	if err == nil {
		err = f(c, np)
	}
	if err != nil {
		return fmt.Errorf("gke: %s(%q): %w", helper, name, err)
	}
	g.refresh(c)
	return nil
}
