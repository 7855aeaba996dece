package console

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// A substrate's replacement in progress, as its document and its
// cluster's node pools show it (shared/substrates' planner): a flavor
// whose node pool cannot change in place gets a new pool first, listed
// first in the substrate's status, and the old one, listed after it,
// serves until as many of the new pool's Nodes joined as it is made with,
// then is deleted. A change of account or cluster builds a new substrate
// instead, whose spec names the old one (After), which must be deleted,
// cluster included, before the new one makes anything.

// Pool roles in a flavor's replacement.
const (
	roleServing  = "serving"  // the flavor's only pool
	roleNew      = "new"      // the newest pool, coming up
	roleOld      = "old"      // replaced, serving until the new one's nodes join
	roleDeleting = "deleting" // replaced, being deleted
)

// PoolProgress is one node pool of a substrate's flavor.
type PoolProgress struct {
	Name, ID, State, Message string
	Role                     string
	// Wanted is how many nodes the pool is made with (its nodeCount in
	// each of its zones, the cluster's when it names none), Current how
	// many the provider runs (nil: not known).
	Wanted  int
	Current *int
	// Joined counts the substrate's joined nodes that are the pool's; -1
	// when they were not read (the fleet's rows).
	Joined int
}

// FlavorProgress is one flavor's node pools: the newest first, then
// those it replaces.
type FlavorProgress struct {
	Flavor    string
	Pools     []PoolProgress
	Replacing bool
}

// SubstrateLink is another substrate, and its cluster's state.
type SubstrateLink struct {
	Tenant, ID, State   string
	ClusterID           string
	ClusterState        string
	Joined              int64
	Gone                bool // no longer stored
	ClusterStateUnknown bool // its cluster was not read
}

// Progress is what a substrate is doing about its node pools and
// cluster.
type Progress struct {
	Flavors []FlavorProgress
	// Replacing: a flavor's pool is being replaced, or the substrate waits
	// for the one it replaces (After) to be deleted.
	Replacing bool
	// Waits is what the substrate says it waits for, while it is not
	// ready (its message).
	Waits string
	// After is the substrate this one replaces, which must be deleted
	// first; ReplacedBy the one that replaces this one.
	After, ReplacedBy *SubstrateLink
	// Retrying is why its runs keep failing, since RetryingSince.
	Retrying      string
	RetryingSince time.Time
	// Unattributed counts joined nodes that are none of the listed
	// pools', by their flavor and, during a replacement, their names
	// (read on the substrate's and its cluster's pages only).
	Unattributed int
}

// fleetDocs are the documents a substrate's progress is made of.
type fleetDocs struct {
	cluster    func(tenant, id string) *model.Cluster
	pools      func(tenant, clusterID string) []model.NodePool // active ones
	substrates []model.Substrate                               // of the substrate's tenant, or all
}

// progressOf is substrate s's progress. joined are its joined nodes (nil:
// not read).
func progressOf(s *model.Substrate, d fleetDocs, joined []resource.SubstrateNode) Progress {
	v := s.View()
	var p Progress
	if v.State != resource.StateReady && v.State != resource.StateDeleted {
		p.Waits = v.Message
	}
	if r := s.Status.Retrying; r != nil {
		p.Retrying, p.RetryingSince = r.Reason, r.Since
	}
	var cl *model.Cluster
	var pools []model.NodePool
	if id := s.ClusterID(); id != "" {
		cl = d.cluster(s.TenantID, id)
		pools = d.pools(s.TenantID, id)
	}
	byID := map[string]*model.NodePool{}
	byName := map[string]*model.NodePool{}
	for i := range pools {
		byID[pools[i].ID] = &pools[i]
		byName[pools[i].Spec.Name] = &pools[i]
	}
	// Each flavor's pools as the status lists them: the newest first.
	var order []string
	groups := map[string][]resource.SubstrateNodePool{}
	for _, np := range s.Status.NodePools {
		if _, ok := groups[np.Flavor]; !ok {
			order = append(order, np.Flavor)
		}
		groups[np.Flavor] = append(groups[np.Flavor], np)
	}
	// A flavor's joined nodes are its pool's when it has one; during a
	// replacement, its pools' are told apart by the nodes' names.
	byFlavor := map[string]int{}
	var names []string
	for _, n := range joined {
		byFlavor[n.Flavor]++
		if len(groups[n.Flavor]) > 1 {
			names = append(names, n.Name)
		}
	}
	counts := joinedByPool(names, cl, pools)
	attributed := 0
	for _, f := range order {
		fp := FlavorProgress{Flavor: f, Replacing: len(groups[f]) > 1}
		for i, np := range groups[f] {
			pp := PoolProgress{Name: np.Name, ID: np.NodePoolID, State: string(np.State), Joined: -1, Role: roleServing}
			doc := byID[np.NodePoolID]
			if doc == nil {
				doc = byName[np.Name]
			}
			if doc != nil {
				st, msg := model.NodePoolState(doc)
				pp.State, pp.Message, pp.Current = string(st), msg, doc.Status.CurrentNodeCount
				pp.Wanted = wantedNodes(doc, cl)
			}
			switch {
			case fp.Replacing && i == 0:
				pp.Role = roleNew
			case i > 0 && (doc == nil || doc.Spec.Deleting || pp.State == string(resource.StateDeleting)):
				pp.Role = roleDeleting
			case i > 0:
				pp.Role = roleOld
			}
			if joined != nil {
				pp.Joined = byFlavor[f]
				if fp.Replacing {
					pp.Joined = counts[np.Name]
				}
				attributed += pp.Joined
			}
			fp.Pools = append(fp.Pools, pp)
		}
		p.Replacing = p.Replacing || fp.Replacing
		p.Flavors = append(p.Flavors, fp)
	}
	if joined != nil {
		p.Unattributed = len(joined) - attributed
	}
	for i := range d.substrates {
		o := &d.substrates[i]
		if o.TenantID != s.TenantID || o.ID == s.ID {
			continue
		}
		if o.ID == s.Spec.After {
			p.After = linkOf(o, d)
		}
		if o.Spec.After == s.ID {
			p.ReplacedBy = linkOf(o, d)
		}
	}
	if s.Spec.After != "" && p.After == nil {
		p.After = &SubstrateLink{Tenant: s.TenantID, ID: s.Spec.After, Gone: true}
	}
	if p.After != nil && !p.After.Gone && p.After.State != string(resource.StateDeleted) {
		p.Replacing = true
	}
	return p
}

func linkOf(o *model.Substrate, d fleetDocs) *SubstrateLink {
	v := o.View()
	l := &SubstrateLink{Tenant: v.TenantID, ID: v.ID, State: string(v.State), ClusterID: v.ClusterID, Joined: v.JoinedNodes}
	if l.ClusterID != "" {
		if cl := d.cluster(v.TenantID, v.ClusterID); cl != nil {
			st, _ := model.ClusterState(cl)
			l.ClusterState = string(st)
		} else {
			l.ClusterStateUnknown = true
		}
	}
	return l
}

// wantedNodes is how many nodes a pool is made with: its node count in
// each of its zones (the cluster's when it names none), as the
// substrate's planner waits for them to join.
func wantedNodes(np *model.NodePool, cl *model.Cluster) int {
	zones := len(np.Spec.Zones)
	if zones == 0 && cl != nil {
		zones = len(cl.Spec.Zones)
	}
	return np.Spec.NodeCount * max(zones, 1)
}

// joinedByPool counts the named joined nodes of each of the cluster's
// pools, by the pool's name ("": none of them, or more than one could
// be). A node's pool is
// told by its name, as GKE names nodes:
// gke-<cluster>-<pool>-<8 characters>-<4 characters>, the first part cut
// to 49 characters (the GKE simulator names them so too). The joined
// nodes' documents do not name their pool, only their flavor, which the
// old and the new pool of a replacement share.
func joinedByPool(joined []string, cl *model.Cluster, pools []model.NodePool) map[string]int {
	counts := map[string]int{}
	if len(joined) == 0 {
		return counts
	}
	prefixes := map[string]string{} // node name prefix → pool, "" when shared
	if cl != nil && cl.Spec.ProviderName != "" {
		for _, np := range pools {
			pre := nodePrefix(cl.Spec.ProviderName, np.Spec.Name)
			if _, dup := prefixes[pre]; dup {
				prefixes[pre] = ""
			} else {
				prefixes[pre] = np.Spec.Name
			}
		}
	}
	for _, n := range joined {
		counts[prefixes[nodeBase(n)]]++
	}
	return counts
}

func nodePrefix(cluster, pool string) string {
	p := "gke-" + cluster + "-" + pool
	if len(p) > 49 {
		p = strings.TrimRight(p[:49], "-")
	}
	return p
}

// nodeBase is a node's name without its last two parts (its instance
// group's and its own), "" when it has not the form of a GKE node's.
func nodeBase(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || len(name)-i-1 != 4 {
		return ""
	}
	j := strings.LastIndexByte(name[:i], '-')
	if j < 0 || i-j-1 != 8 {
		return ""
	}
	return name[:j]
}

// sortSubstrates orders substrate rows as the fleet shows them: by
// tenant, the newest first.
func sortSubstrates(rows []SubstrateRow) {
	slices.SortFunc(rows, func(a, b SubstrateRow) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
}

// substrateRow is a substrate as the fleet shows it.
func substrateRow(s *model.Substrate, d fleetDocs, joined []resource.SubstrateNode) SubstrateRow {
	v := s.View()
	return SubstrateRow{Tenant: v.TenantID, ID: v.ID, State: string(v.State), Message: v.Message, Mode: string(v.Mode),
		ClusterID: v.ClusterID, PoolID: v.PoolID, Joined: v.JoinedNodes, NodePools: v.NodePools, CreatedAt: v.CreatedAt,
		Progress: progressOf(s, d, joined)}
}
