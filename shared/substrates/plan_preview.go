package substrates

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/kubeapply"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// Preview is what kubernetesSubstrates.plan answers: the runs of a
// substrate, as a run is (plan, act, apply the action's Effect, plan
// again, until the plan has nothing to do), on a world that a preview
// imagines in place of the store, the provider and the cluster's
// Kubernetes API. Each action is taken as done as it is asked (what it
// makes is there at once, with an ID made up); between two runs the world
// moves on as it would by itself: the previous substrate deleted,
// clusters and pools on their way ready, those being deleted gone, the
// Nodes of the pools that bcd's objects select joined. An error stays.
// It changes nothing.

// planned marks the IDs of what a preview made up; they are not shown.
const planned = "planned:"

// maxPreviewRuns bounds a preview: far more runs than any plan of 8
// flavors needs.
const maxPreviewRuns = 50

// Preview returns the actions that the substrate's runs would take from
// in, in order, and the substrate as it would be once converged. zones
// are the zones of a cluster the substrate would create (its policy's or
// its account's). A substrate with no ID yet is one to be recorded.
func Preview(in Input, zones []string, now time.Time) ([]resource.PlanAction, model.Substrate) {
	w := preview(in, zones, now)
	return w.actions, w.result()
}

// world is what a preview imagines: the store's documents (in, as a run
// reads them), the cluster's Kubernetes API (held, joined) and what the
// runs did.
type world struct {
	in    Input
	zones []string
	now   time.Time
	// held are bcd's objects in the cluster's Kubernetes API, with a
	// token in their Secret (nil: none, or not the substrate's); joined
	// the substrate's joined nodes.
	held   *kubeapply.Desired
	joined map[string]bool
	// runs are the runs' trajectories: the actions each took and the
	// decision it ended with.
	runs    []previewRun
	actions []resource.PlanAction
	// replaced are the pools the preview's replacements replace.
	replaced map[string]bool
	teardown []string
	made     int
}

// previewRun is one run of a preview.
type previewRun struct {
	taken []Action
	// on are the inputs the actions were planned on.
	on []Input
	d  Decision
}

// preview runs the substrate's runs in the world of in until one has
// nothing to do, or is refused.
func preview(in Input, zones []string, now time.Time) *world {
	w := &world{in: in.clone(), zones: zones, now: now, joined: map[string]bool{}, replaced: map[string]bool{}}
	s := &w.in.Substrate
	if s.ID == "" {
		s.ID = planned + "substrate"
	}
	// What the substrate applied, it holds, on its pools as its status
	// lists them (unless an object of the same name stood in the way),
	// and their nodes joined.
	if s.Status.Token.Hash != "" && s.Status.Applied > 0 {
		// Tolerating the taints of those pools, not of the flavors the
		// spec may have changed since.
		as := *s
		as.Spec.Flavors = nil
		held := desiredObjects(&Decision{Substrate: as}, w.in.Pools, previewConfig)
		if msg := s.Status.Message; s.Status.State != resource.StateError || !strings.HasPrefix(msg, foreignPrefix) {
			w.held = &held
		}
		for _, n := range w.nodes(held.NodePools) {
			w.joined[n.Name] = true
		}
	}
	for range maxPreviewRuns {
		w.settle()
		r, more := w.run()
		w.runs = append(w.runs, r)
		if !more {
			break
		}
	}
	return w
}

// run is one run: plan, act, apply the effect, until the plan has nothing
// to do. more: the run acted, and the next one may find more to do.
func (w *world) run() (r previewRun, more bool) {
	in := w.in
	in.Seen, in.Acted, in.Tried, in.Removed = nil, false, false, false
	refused := false
	var d Decision
	for i := range maxActions + 1 {
		if i == maxActions {
			d.Converging = true
			break
		}
		d = Plan(in, w.now)
		if d.Observe {
			in.Seen = w.seen(&d, &in)
			continue
		}
		if d.Action == nil {
			break
		}
		o, ok := w.take(&d, &in)
		if !ok {
			refused = true
			break
		}
		r.taken, r.on = append(r.taken, *d.Action), append(r.on, in)
		next, err := Effect(in, &d, o)
		if err != nil {
			// take checks what lifecycle refuses: not reached.
			Refused(&d, err.Error())
			refused = true
			break
		}
		in = next
	}
	r.d = d
	// The run saves the substrate as it leaves it, and the nodes that
	// left leave.
	in.Substrate = d.Substrate
	for _, n := range d.Left {
		delete(w.joined, n)
	}
	w.in = in
	return r, len(r.taken) > 0 && !refused && !d.Done
}

// result is the substrate as the last run left it, with the nodes joined
// then, and no made-up IDs.
func (w *world) result() model.Substrate {
	d := w.runs[len(w.runs)-1].d
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
	s.Joined = int64(len(w.joined))
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
	if strings.HasPrefix(s.Status.Token.Hash, planned) {
		s.Status.Token = model.JoinToken{}
	}
	return s
}

func orSo(msg, otherwise string) string {
	if msg == "" {
		return otherwise
	}
	return msg
}

// settle moves the world on as it would by itself between two runs: the
// previous substrate deleted, clusters and pools on their way ready, those
// being deleted gone (with bcd's objects in a cluster that goes), the
// Nodes of the pools that bcd's objects select joined. Errors stay.
func (w *world) settle() {
	in := &w.in
	in.PreviousGone = true
	if c := in.Cluster; c != nil {
		switch {
		case c.Spec.Deleting:
			in.Cluster, in.Pools, in.Adopted, w.held = nil, nil, false, nil
		case c.Active && c.Status.State != resource.StateError:
			c.Status.State, c.Status.Message, c.Status.ObservedGeneration = resource.StateReady, "", c.Spec.Generation
		}
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
	if w.held != nil {
		for _, n := range w.nodes(w.held.NodePools) {
			w.joined[n.Name] = true
		}
	}
}

// nodes are the Nodes of the substrate's ready pools among the named ones
// (all of them when names is nil): as many as each is made with.
func (w *world) nodes(names []string) []kubeapply.Node {
	var out []kubeapply.Node
	if w.in.Cluster == nil {
		return nil
	}
	for _, np := range w.in.Pools {
		if np.Spec.ManagedBy != w.in.Substrate.ID || np.Status.State != resource.StateReady || (names != nil && !slices.Contains(names, np.Spec.Name)) {
			continue
		}
		for i := range wantedNodes(&np, w.in.Cluster) {
			out = append(out, kubeapply.Node{Name: np.Spec.Name + "/" + strconv.Itoa(i), NodePool: np.Spec.Name})
		}
	}
	return out
}

// seen is what a run would read: the Nodes of the substrate's ready
// pools, the nodes joined, and whether bcd's objects are held as the
// decision's spec and pools ask.
func (w *world) seen(d *Decision, in *Input) *Seen {
	seen := &Seen{Nodes: w.nodes(nil)}
	for _, name := range slices.Sorted(maps.Keys(w.joined)) {
		seen.Joined = append(seen.Joined, resource.SubstrateNode{Name: name})
	}
	if w.held != nil && !in.Substrate.Spec.Deleting {
		seen.Held = reflect.DeepEqual(*w.held, desiredObjects(d, in.Pools, previewConfig))
	}
	return seen
}

// take carries the decision's action out in the world and notes it, and
// returns what the world answered; false when the action would be refused
// (d is then the outcome).
func (w *world) take(d *Decision, in *Input) (Outcome, bool) {
	a := d.Action
	spec := in.Substrate.Spec
	note := func(pa resource.PlanAction) { w.actions = append(w.actions, pa) }
	switch a.Kind {
	case CreateCluster:
		c, pools := clusterRequest(&in.Substrate)
		o := Outcome{ClusterID: planned + "cluster", Zones: w.zones}
		var names []string
		for _, np := range pools {
			o.PoolIDs = append(o.PoolIDs, w.newID())
			names = append(names, np.Name)
		}
		note(resource.PlanAction{Action: resource.PlanCreateCluster,
			Reason: fmt.Sprintf("the pool asks for a cluster: %s (standard, %s), with node pools %s", c.Name, c.Region, strings.Join(names, ", "))})
		return o, true
	case AdoptCluster:
		if err := lifecycle.MayAdopt(in.Cluster, in.Substrate.ID, spec.AccountID); err != nil {
			Refused(d, errs.Public(err, internalReason))
			return Outcome{}, false
		}
		note(resource.PlanAction{Action: resource.PlanAdoptCluster,
			Reason: fmt.Sprintf("the pool adopts cluster %s: the substrate adds its node pools and touches nothing else", spec.AdoptClusterID)})
		return Outcome{}, true
	case CreateNodePool, ReplaceNodePool:
		f := spec.Flavors[a.Flavor]
		np := poolSpec(&in.Substrate, a)
		// As the store would check it.
		c := in.Cluster.Clone()
		if err := lifecycle.AddNodePool(&c, &np, false, w.now); err != nil {
			Refused(d, errs.Public(err, internalReason))
			return Outcome{}, false
		}
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
		return Outcome{PoolIDs: []string{w.newID()}}, true
	case ResizeNodePool:
		p := &in.Pools[a.Pool]
		f := spec.Flavors[a.Flavor]
		note(resource.PlanAction{Action: resource.PlanResizeNodePool, NodePool: p.Spec.Name, Flavor: f.Name, From: sizeOf(p.Spec), To: sizeOf(f.NodePool),
			Reason: fmt.Sprintf("flavor %s asks for another size: resized in place", f.Name)})
		return Outcome{}, true
	case DeleteNodePool:
		name := in.Pools[a.Pool].Spec.Name
		switch {
		case spec.Deleting:
			w.teardownPart("deletes node pool " + name)
		case a.Retire && w.replaced[name]:
			// Part of a replacement the plan shows.
		case a.Retire:
			note(resource.PlanAction{Action: resource.PlanDeleteNodePool, NodePool: name,
				Reason: fmt.Sprintf("replaced with node pool %s: deleted once that one is ready and its nodes joined", orSo(a.Name, "a newer one"))})
		default:
			note(resource.PlanAction{Action: resource.PlanDeleteNodePool, NodePool: name,
				Reason: "not the node pool of any of the pool's flavors"})
		}
		return Outcome{}, true
	case ApplyObjects:
		if msg := in.Substrate.Status.Message; in.Substrate.Status.State == resource.StateError && strings.HasPrefix(msg, foreignPrefix) {
			// The last apply was refused: the same objects still stand in
			// the way.
			Refused(d, msg)
			return Outcome{}, false
		}
		// As a run would apply them (the image and URL aside, which are
		// the deployment's).
		objs := desiredObjects(d, in.Pools, previewConfig)
		if err := kubeapply.Validate(objs); err != nil {
			Refused(d, objectsRefusal(err))
			return Outcome{}, false
		}
		w.held = &objs
		var o Outcome
		why := "bcd's objects are not as the pool asks"
		if a.Mint {
			o.Token = model.JoinToken{Hash: planned + "token", MintedAt: w.now}
			why = "bcd's objects are applied with a new join token"
		}
		note(resource.PlanAction{Action: resource.PlanApplyObjects,
			Reason: fmt.Sprintf("%s: namespace %s, ServiceAccount, Secret and DaemonSet on node pools %s", why, kubeapply.Namespace, strings.Join(objs.NodePools, ", "))})
		return o, true
	case DeleteCluster:
		w.teardownPart("deletes cluster " + in.Cluster.Spec.Name)
		return Outcome{}, true
	case RemoveObjects:
		w.teardownPart("removes bcd's objects")
		w.held = nil
		return Outcome{Gone: true}, true
	case ReleaseCluster:
		w.teardownPart("releases cluster " + in.Cluster.ID)
		return Outcome{}, true
	}
	Refused(d, fmt.Sprintf("unknown action %q", a.Kind))
	return Outcome{}, false
}

// newID is the made-up ID of a node pool the preview makes.
func (w *world) newID() string {
	w.made++
	return planned + strconv.Itoa(w.made)
}

// teardownPart notes what a teardown does, once.
func (w *world) teardownPart(part string) {
	if !slices.Contains(w.teardown, part) {
		w.teardown = append(w.teardown, part)
	}
}

// foreignPrefix begins the error of an apply refused for an object that
// is not the substrate's (run.apply).
const foreignPrefix = "an object of the same name is not the substrate's"

// previewConfig stands for the deployment's Config in a preview's objects.
var previewConfig = Config{Image: "planned", JoinURL: "planned"}

// teardownReason says what a teardown undoes.
func (w *world) teardownReason() string {
	parts := []string{"the pool no longer asks for this substrate: its nodes leave, its join token is revoked"}
	parts = append(parts, w.teardown...)
	return strings.Join(parts, "; ")
}

// sizeOf is a pool's size, as a plan shows it.
func sizeOf(s model.NodePoolSpec) map[string]any {
	m := map[string]any{"nodeCount": s.NodeCount}
	if s.Autoscaling != nil {
		m["autoscaling"] = *s.Autoscaling
	}
	return m
}

// shapeChange is what of a pool's shape changes, from and to.
func shapeChange(a, b model.NodePoolSpec) (from, to map[string]any) {
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
