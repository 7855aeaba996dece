package substrates

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/kubeapply"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
)

// Preview is what kubernetesSubstrates.plan answers: the planner that the
// runs use, run on a copy of what a run would read until it has nothing
// left to do, each action taken as done at once (what it makes ready, the
// nodes of each pool joined, what it deletes gone). The world moves on
// as it would by itself too: what is on its way gets there, an error
// stays. It changes nothing.

// planned marks the IDs of what a preview made up; they are not shown.
const planned = "planned:"

// maxPreviewSteps bounds a preview: far more decisions than any plan of
// 8 flavors needs.
const maxPreviewSteps = 200

// Preview returns the actions that the substrate's runs would take from
// in, in order, and the substrate as it would be once converged. zones
// are the zones of a cluster the substrate would create (its policy's or
// its account's). A substrate with no ID yet is one to be recorded.
func Preview(in Input, zones []string, now time.Time) ([]resource.PlanAction, lifecycle.Substrate) {
	w := &world{in: in, zones: zones, now: now}
	w.in.Substrate = in.Substrate.Clone()
	if w.in.Substrate.ID == "" {
		w.in.Substrate.ID = planned + "substrate"
	}
	w.in.Pools = slices.Clone(in.Pools)
	if in.Cluster != nil {
		c := *in.Cluster
		w.in.Cluster = &c
	}
	w.applied = w.in.Substrate.Status.Token.Hash != "" && w.in.Substrate.Status.Applied == w.in.Substrate.Spec.Generation
	for _, np := range w.in.Substrate.Status.NodePools {
		w.appliedOn = append(w.appliedOn, np.Name)
	}
	return w.run()
}

// world is what a preview imagines.
type world struct {
	in    Input
	zones []string
	now   time.Time
	// applied: bcd's objects are as the spec asks, on appliedOn.
	applied   bool
	appliedOn []string
	actions   []resource.PlanAction
	// replaced are the pools the preview's replacements replace.
	replaced map[string]bool
	teardown []string
	made     int
}

func (w *world) run() ([]resource.PlanAction, lifecycle.Substrate) {
	w.replaced = map[string]bool{}
	var d Decision
	for range maxPreviewSteps {
		w.settle()
		d = Plan(w.in, w.now)
		if d.Observe {
			w.in.Seen = w.seen(&d)
			d = Plan(w.in, w.now)
		}
		if d.Action == nil {
			break
		}
		if !w.take(&d) {
			break
		}
		w.in.Substrate = d.Substrate
		w.in.Seen = nil
	}
	s := d.Substrate
	if w.teardown != nil || s.Spec.Deleting {
		w.actions = append(w.actions, resource.PlanAction{Action: resource.PlanTeardown, Reason: w.teardownReason()})
	}
	switch {
	case s.Status.State == resource.StateError:
		w.actions = append(w.actions, resource.PlanAction{Action: resource.PlanNone, Reason: "error: " + s.Status.Message})
	case s.Status.State != resource.StateReady && s.Status.State != resource.StateDeleted:
		w.actions = append(w.actions, resource.PlanAction{Action: resource.PlanNone, Reason: orSo(s.Status.Message, "waiting for what is on its way")})
	case len(w.actions) == 0:
		w.actions = append(w.actions, resource.PlanAction{Action: resource.PlanNone, Reason: "the substrate is as the pool asks"})
	}
	s.Joined = int64(len(w.nodes()))
	if !s.Active || s.Status.State == resource.StateDeleted {
		s.Joined = 0
	}
	if strings.HasPrefix(s.ID, planned) {
		s.ID = ""
	}
	if strings.HasPrefix(s.Status.ClusterID, planned) {
		s.Status.ClusterID = ""
	}
	for i := range s.Status.NodePools {
		if strings.HasPrefix(s.Status.NodePools[i].NodePoolID, planned) {
			s.Status.NodePools[i].NodePoolID = ""
		}
	}
	return w.actions, s
}

func orSo(msg, otherwise string) string {
	if msg == "" {
		return otherwise
	}
	return msg
}

// settle moves the world on as it would by itself: the previous
// substrate deleted, clusters and pools on their way ready, pools being
// deleted gone. Errors stay.
func (w *world) settle() {
	in := &w.in
	in.PreviousGone = true
	if c := in.Cluster; c != nil && c.Active && !c.Spec.Deleting && c.Status.State != resource.StateError {
		c.Status.State, c.Status.Message, c.Status.ObservedGeneration = resource.StateReady, "", c.Spec.Generation
	}
	pools := in.Pools[:0:0]
	for _, np := range in.Pools {
		if np.Spec.Deleting {
			continue
		}
		if np.Status.State != resource.StateError {
			np.Status.State, np.Status.Message, np.Status.ObservedGeneration = resource.StateReady, "", np.Spec.Generation
		}
		pools = append(pools, np)
	}
	in.Pools = pools
}

// nodes are the Nodes the substrate's pools would have: as many as each
// is made with, all joined.
func (w *world) nodes() []kubeapply.Node {
	var out []kubeapply.Node
	if w.in.Cluster == nil {
		return nil
	}
	for _, np := range w.in.Pools {
		if np.Spec.ManagedBy != w.in.Substrate.ID || np.Status.State == resource.StateError {
			continue
		}
		for i := range wantedNodes(&np, w.in.Cluster) {
			out = append(out, kubeapply.Node{Name: np.Spec.Name + "/" + strconv.Itoa(i), NodePool: np.Spec.Name})
		}
	}
	return out
}

// seen is what a run would read: every node joined, bcd's objects held
// when they were applied as the decision's spec and pools ask.
func (w *world) seen(d *Decision) *Seen {
	seen := &Seen{Nodes: w.nodes()}
	for _, n := range seen.Nodes {
		seen.Joined = append(seen.Joined, resource.SubstrateNode{Name: n.Name})
	}
	var on []string
	for _, np := range d.Substrate.Status.NodePools {
		on = append(on, np.Name)
	}
	seen.Held = w.applied && slices.Equal(on, w.appliedOn)
	return seen
}

// take carries the decision's action out in the world and notes it;
// false when the action would be refused (d is then the outcome).
func (w *world) take(d *Decision) bool {
	a := d.Action
	in := &w.in
	s := &d.Substrate
	spec := in.Substrate.Spec
	note := func(pa resource.PlanAction) { w.actions = append(w.actions, pa) }
	switch a.Kind {
	case CreateCluster:
		c := &lifecycle.Cluster{ID: planned + "cluster", TenantID: in.Substrate.TenantID, Active: true,
			Spec: lifecycle.ClusterSpec{Name: ClusterName(in.Substrate.PoolID), Mode: resource.ModeStandard, Region: spec.Region,
				ReleaseChannel: spec.ReleaseChannel, Zones: slices.Clone(w.zones), ManagedBy: in.Substrate.ID, Generation: 1}}
		in.Cluster, in.Pools = c, nil
		var names []string
		for _, f := range spec.Flavors {
			w.makePool(f.NodePool)
			names = append(names, f.NodePool.Name)
		}
		s.Status.ClusterID = c.ID
		note(resource.PlanAction{Action: resource.PlanCreateCluster,
			Reason: fmt.Sprintf("the pool asks for a cluster: %s (standard, %s), with node pools %s", c.Spec.Name, spec.Region, strings.Join(names, ", "))})
	case AdoptCluster:
		if err := lifecycle.MayAdopt(in.Cluster, in.Substrate.ID, spec.AccountID); err != nil {
			Refused(d, errs.Public(err, internalReason))
			return false
		}
		in.Adopted = true
		s.Status.ClusterID = spec.AdoptClusterID
		note(resource.PlanAction{Action: resource.PlanAdoptCluster,
			Reason: fmt.Sprintf("the pool adopts cluster %s: the substrate adds its node pools and touches nothing else", spec.AdoptClusterID)})
	case CreateNodePool, ReplaceNodePool:
		f := spec.Flavors[a.Flavor]
		np := f.NodePool
		np.Name = a.Name
		if a.Kind == CreateNodePool {
			note(resource.PlanAction{Action: resource.PlanCreateNodePool, NodePool: a.Name, Flavor: f.Name, To: sizeOf(np),
				Reason: fmt.Sprintf("flavor %s has no node pool", f.Name)})
		} else {
			old := in.Pools[a.Pool].Spec
			from, to := shapeChange(old, np)
			from["nodePool"], to["nodePool"] = old.Name, np.Name
			w.replaced[old.Name] = true
			changed := keysBut(to, "nodePool")
			slices.Sort(changed)
			note(resource.PlanAction{Action: resource.PlanReplaceNodePool, NodePool: old.Name, Flavor: f.Name, From: from, To: to,
				Reason: fmt.Sprintf("%s cannot change in place: node pool %s is made first, and %s deleted once it is ready and its nodes joined",
					strings.Join(changed, ", "), np.Name, old.Name)})
		}
		w.makePool(np)
	case ResizeNodePool:
		p := &in.Pools[a.Pool]
		f := spec.Flavors[a.Flavor]
		from, to := sizeOf(p.Spec), sizeOf(f.NodePool)
		p.Spec.NodeCount, p.Spec.Autoscaling = f.NodePool.NodeCount, f.NodePool.Autoscaling
		note(resource.PlanAction{Action: resource.PlanResizeNodePool, NodePool: p.Spec.Name, Flavor: f.Name, From: from, To: to,
			Reason: fmt.Sprintf("flavor %s asks for another size: resized in place", f.Name)})
	case DeleteNodePool:
		name := in.Pools[a.Pool].Spec.Name
		in.Pools = slices.Delete(slices.Clone(in.Pools), a.Pool, a.Pool+1)
		switch {
		case spec.Deleting:
			w.teardown = append(w.teardown, "deletes node pool "+name)
		case a.Retire && w.replaced[name]:
			// Part of a replacement the plan shows.
		case a.Retire:
			note(resource.PlanAction{Action: resource.PlanDeleteNodePool, NodePool: name,
				Reason: fmt.Sprintf("replaced with node pool %s: deleted once that one is ready and its nodes joined", orSo(a.Name, "a newer one"))})
		default:
			note(resource.PlanAction{Action: resource.PlanDeleteNodePool, NodePool: name,
				Reason: "not the node pool of any of the pool's flavors"})
		}
	case ApplyObjects:
		if msg := in.Substrate.Status.Message; in.Substrate.Status.State == resource.StateError && strings.HasPrefix(msg, foreignPrefix) {
			// The last apply was refused: the same objects still stand in
			// the way.
			Refused(d, msg)
			return false
		}
		// As a run would apply them (the image and URL aside, which are
		// the deployment's).
		if err := kubeapply.Validate(desiredObjects(d, in.Pools, previewConfig)); err != nil {
			Refused(d, objectsRefusal(err))
			return false
		}
		s.Status.Applied = spec.Generation
		if a.Mint {
			s.Status.Token = lifecycle.JoinToken{Hash: planned + "token", MintedAt: w.now}
		}
		w.applied, w.appliedOn = true, nil
		for _, np := range s.Status.NodePools {
			w.appliedOn = append(w.appliedOn, np.Name)
		}
		why := "bcd's objects are not as the pool asks"
		if a.Mint {
			why = "bcd's objects are applied with a new join token"
		}
		note(resource.PlanAction{Action: resource.PlanApplyObjects,
			Reason: fmt.Sprintf("%s: namespace %s, ServiceAccount, Secret and DaemonSet on node pools %s", why, kubeapply.Namespace, strings.Join(w.appliedOn, ", "))})
	case DeleteCluster:
		w.teardown = append(w.teardown, "deletes cluster "+in.Cluster.Spec.Name)
		in.Cluster, in.Pools = nil, nil
	case RemoveObjects:
		w.teardown = append(w.teardown, "removes bcd's objects")
		in.Tried, in.Removed = true, true
	case ReleaseCluster:
		w.teardown = append(w.teardown, "releases cluster "+in.Cluster.ID)
		in.Adopted = false
	}
	return true
}

// foreignPrefix begins the error of an apply refused for an object that
// is not the substrate's (run.apply).
const foreignPrefix = "an object of the same name is not the substrate's"

// previewConfig stands for the deployment's Config in a preview's objects.
var previewConfig = Config{Image: "planned", JoinURL: "planned"}

// makePool adds a ready pool of the substrate's to the world.
func (w *world) makePool(spec lifecycle.NodePoolSpec) {
	w.made++
	spec = lifecycle.Managed(spec, w.in.Substrate.ID, w.in.Substrate.PoolID)
	spec.Generation = 1
	w.in.Pools = append(w.in.Pools, lifecycle.NodePool{ID: planned + strconv.Itoa(w.made), TenantID: w.in.Substrate.TenantID, Active: true, Spec: spec,
		Status: lifecycle.NodePoolStatus{State: resource.StateReady, ObservedGeneration: 1}})
}

// teardownReason says what a teardown undoes.
func (w *world) teardownReason() string {
	parts := []string{"the pool no longer asks for this substrate: its nodes leave, its join token is revoked"}
	parts = append(parts, w.teardown...)
	return strings.Join(parts, "; ")
}

// sizeOf is a pool's size, as a plan shows it.
func sizeOf(s lifecycle.NodePoolSpec) map[string]any {
	m := map[string]any{"nodeCount": s.NodeCount}
	if s.Autoscaling != nil {
		m["autoscaling"] = *s.Autoscaling
	}
	return m
}

// shapeChange is what of a pool's shape changes, from and to.
func shapeChange(a, b lifecycle.NodePoolSpec) (from, to map[string]any) {
	from, to = map[string]any{}, map[string]any{}
	x, y := shape(a), shape(b)
	for _, f := range []struct {
		name string
		a, b any
	}{
		{"machineType", x.MachineType, y.MachineType}, {"diskGiB", x.DiskGiB, y.DiskGiB}, {"diskType", x.DiskType, y.DiskType},
		{"spot", x.Spot, y.Spot}, {"accelerators", x.Accelerators, y.Accelerators}, {"zones", x.Zones, y.Zones},
		{"labels", x.Labels, y.Labels}, {"taints", x.Taints, y.Taints},
	} {
		if !reflect.DeepEqual(f.a, f.b) {
			from[f.name], to[f.name] = f.a, f.b
		}
	}
	return from, to
}

// keysBut are m's keys but skip.
func keysBut(m map[string]any, skip string) []string {
	var out []string
	for k := range m {
		if k != skip {
			out = append(out, k)
		}
	}
	return out
}
