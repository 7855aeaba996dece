package input

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// Autoscaling bounds a pool's node count per zone.
type Autoscaling struct {
	MinNodes int `json:"minNodes" validate:"between=0:1000"`
	MaxNodes int `json:"maxNodes" validate:"between=1:1000"`
}

// accelerators are the GPUs attached to each node.
type accelerators struct {
	Type  string `json:"type" validate:"acceleratortype"`
	Count int    `json:"count" validate:"between=1:16"`
}

// taint is a Kubernetes taint put on every node of a pool. Key and Value
// are checked with Kubernetes' own rules. Its effect is spelled as in
// Kubernetes, as the stored spec keeps it.
type taint struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Effect string `json:"effect" validate:"oneof=NoSchedule PreferNoSchedule NoExecute"`
}

// nodePoolSpec is a node pool spec as the body gives it, with the tags the
// checks and the schemas read: the body of kubernetesNodePools.create
// without tenantId, clusterId and idempotencyKey, one element of
// kubernetesClusters.create's nodePools and one flavor of a pool event.
// It does not leave the package: what does is its model.NodePoolSpec.
type nodePoolSpec struct {
	Name         string        `json:"name" validate:"name"`
	MachineType  string        `json:"machineType" validate:"machinetype"`
	NodeCount    int           `json:"nodeCount" validate:"between=0:1000"`
	Autoscaling  *Autoscaling  `json:"autoscaling,omitempty"`
	DiskGiB      *int          `json:"diskGiB,omitempty" validate:"omitempty,between=10:65536"`
	DiskType     string        `json:"diskType,omitempty" validate:"omitempty,disktype"`
	Spot         bool          `json:"spot"`
	Accelerators *accelerators `json:"accelerators,omitempty"`
	Zones        []string      `json:"zones" validate:"max=10,dive,zone"`
	// Labels and Taints are checked by hand with Kubernetes' rules.
	Labels map[string]string `json:"labels"`
	Taints []taint           `json:"taints" validate:"max=32,dive"`
}

// nodePoolSpecKeys are the members of a NodePoolSpec: the fields update
// refuses as immutable rather than unknown.
var nodePoolSpecKeys = map[string]bool{
	"name": true, "machineType": true, "nodeCount": true, "autoscaling": true,
	"diskGiB": true, "diskType": true, "spot": true, "accelerators": true,
	"zones": true, "labels": true, "taints": true,
}

// decodeSpec reads the members of a node pool spec from f.
func decodeSpec(f *fields, s *nodePoolSpec) {
	s.Name, _ = f.str("name", true, false)
	s.MachineType, _ = f.str("machineType", true, false)
	s.NodeCount, _ = f.int("nodeCount", true)
	if a := f.object("autoscaling", false); a != nil {
		s.Autoscaling = decodeAutoscaling(a)
	}
	if n, ok := f.int("diskGiB", false); ok {
		s.DiskGiB = &n
	}
	s.DiskType, _ = f.str("diskType", false, false)
	s.Spot = f.bool("spot")
	if a := f.object("accelerators", false); a != nil {
		s.Accelerators = &accelerators{}
		s.Accelerators.Type, _ = a.str("type", true, false)
		s.Accelerators.Count, _ = a.int("count", true)
		a.rest(unknown)
	}
	s.Zones = f.strings("zones")
	s.Labels = f.stringMap("labels")
	taints := f.array("taints")
	if taints != nil {
		s.Taints = make([]taint, len(taints))
	}
	for i, v := range taints {
		t := asObject(f.r, indexPath(keyPath(f.path, "taints"), i), v)
		if t == nil {
			continue
		}
		s.Taints[i].Key, _ = t.str("key", true, false)
		s.Taints[i].Value, _ = t.str("value", false, true)
		s.Taints[i].Effect, _ = t.str("effect", true, false)
		t.rest(unknown)
	}
}

func decodeAutoscaling(f *fields) *Autoscaling {
	a := &Autoscaling{}
	a.MinNodes, _ = f.int("minNodes", true)
	a.MaxNodes, _ = f.int("maxNodes", true)
	f.rest(unknown)
	return a
}

// check reports every broken field of the spec at path.
func (s *nodePoolSpec) check(r *report, path string) {
	r.check(path, s)
	r.checkUnique(joinPath(path, "zones"), s.Zones)
	r.checkLabels(joinPath(path, "labels"), s.Labels)
	r.checkTaints(joinPath(path, "taints"), s.Taints)
	checkBounds(r, path, s.NodeCount, s.Autoscaling)
}

// checkBounds reports autoscaling whose minNodes is above its maxNodes, and
// a nodeCount outside the bounds, unless those fields are broken already.
func checkBounds(r *report, path string, nodeCount int, a *Autoscaling) {
	if a == nil {
		return
	}
	minP, maxP := joinPath(path, "autoscaling.minNodes"), joinPath(path, "autoscaling.maxNodes")
	if !r.ok(minP) || !r.ok(maxP) {
		return
	}
	if a.MinNodes > a.MaxNodes {
		r.add(minP, fmt.Sprintf("must not be above autoscaling.maxNodes (%d)", a.MaxNodes))
		return
	}
	countP := joinPath(path, "nodeCount")
	if r.ok(countP) && (nodeCount < a.MinNodes || nodeCount > a.MaxNodes) {
		r.add(countP, fmt.Sprintf("must be between autoscaling.minNodes (%d) and autoscaling.maxNodes (%d)", a.MinNodes, a.MaxNodes))
	}
}

// normalized returns a copy with the defaults applied and no nil
// collections, so two requests that mean the same are equal.
func (s nodePoolSpec) normalized() nodePoolSpec {
	n := s
	if s.Autoscaling != nil {
		a := *s.Autoscaling
		n.Autoscaling = &a
	}
	if s.DiskGiB != nil {
		d := *s.DiskGiB
		n.DiskGiB = &d
	}
	if s.Accelerators != nil {
		a := *s.Accelerators
		n.Accelerators = &a
	}
	n.Zones = append([]string{}, s.Zones...)
	n.Labels = maps.Clone(s.Labels)
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Taints = append([]taint{}, s.Taints...)
	return n
}

// spec is the lifecycle spec the body asks for, with the defaults applied
// and empty collections rather than nil ones (as the pool is stored and
// answered). It shares no memory with s.
func (s *nodePoolSpec) spec() model.NodePoolSpec {
	n := s.normalized()
	p := model.NodePoolSpec{
		Name:        n.Name,
		MachineType: n.MachineType,
		NodeCount:   n.NodeCount,
		DiskType:    n.DiskType,
		Spot:        n.Spot,
		Zones:       n.Zones,
		Labels:      n.Labels,
		Taints:      make([]resource.Taint, len(n.Taints)),
	}
	if n.Autoscaling != nil {
		p.Autoscaling = &resource.Autoscaling{MinNodes: n.Autoscaling.MinNodes, MaxNodes: n.Autoscaling.MaxNodes}
	}
	if n.DiskGiB != nil {
		p.DiskGiB = *n.DiskGiB
	}
	if n.Accelerators != nil {
		p.Accelerators = &resource.Accelerators{Type: n.Accelerators.Type, Count: n.Accelerators.Count}
	}
	for i, t := range n.Taints {
		p.Taints[i] = resource.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}
	}
	return p
}

// CreateNodePool is a decoded kubernetesNodePools.create: the cluster of
// a tenant, and the spec of the pool to add to it.
type CreateNodePool struct {
	TenantID  string
	ClusterID string
	// IdempotencyKey is "" when the body has none.
	IdempotencyKey string
	Spec           model.NodePoolSpec
	body           createNodePoolBody
}

// createNodePoolBody is the body of kubernetesNodePools.create.
type createNodePoolBody struct {
	TenantID       string `json:"tenantId" validate:"token"`
	ClusterID      string `json:"clusterId" validate:"clusterid"`
	IdempotencyKey string `json:"idempotencyKey,omitempty" validate:"omitempty,token"`
	// nodePoolSpec is checked on its own, so its paths have no prefix.
	nodePoolSpec `validate:"-"`
}

// DecodeCreateNodePool decodes and validates the body of
// kubernetesNodePools.create. Any problem is an *errs.Error of kind
// errs.Invalid listing every broken field by its JSON path. Whether the
// zones are the cluster's is the store's to say (lifecycle.AddNodePool).
func DecodeCreateNodePool(body []byte) (*CreateNodePool, error) {
	b := createNodePoolBody{}
	err := decode(body, func(f *fields) {
		b.TenantID, _ = f.str("tenantId", true, false)
		b.ClusterID, _ = f.str("clusterId", true, false)
		b.IdempotencyKey, _ = f.str("idempotencyKey", false, false)
		decodeSpec(f, &b.nodePoolSpec)
		f.rest(unknown)
		f.r.check("", &b)
		b.nodePoolSpec.check(f.r, "")
	})
	if err != nil {
		return nil, err
	}
	return &CreateNodePool{TenantID: b.TenantID, ClusterID: b.ClusterID, IdempotencyKey: b.IdempotencyKey, Spec: b.spec(), body: b}, nil
}

// Canonical is the request in a deterministic JSON form without its
// idempotency key, with defaults applied: two requests that ask for the same
// pool have equal Canonical forms (compare or hash them to tell a retry from
// a different request under the same key). Zones keep their order.
func (c *CreateNodePool) Canonical() []byte {
	return canonical(struct {
		TenantID  string `json:"tenantId"`
		ClusterID string `json:"clusterId"`
		nodePoolSpec
	}{c.body.TenantID, c.body.ClusterID, c.body.nodePoolSpec.normalized()})
}

// ClusterRef is the body of kubernetesNodePools.list, kubernetesClusters.get
// and kubernetesClusters.delete: the cluster of a tenant.
type ClusterRef struct {
	TenantID  string `json:"tenantId" validate:"token"`
	ClusterID string `json:"clusterId" validate:"clusterid"`
}

// DecodeClusterRef decodes and validates a body naming one cluster
// (kubernetesNodePools.list, kubernetesClusters.get and .delete). Any
// problem is an *errs.Error of kind errs.Invalid.
func DecodeClusterRef(body []byte) (*ClusterRef, error) {
	c := &ClusterRef{}
	err := decode(body, func(f *fields) {
		c.TenantID, _ = f.str("tenantId", true, false)
		c.ClusterID, _ = f.str("clusterId", true, false)
		f.rest(unknown)
		f.r.check("", c)
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// NodePoolRef is the body of kubernetesNodePools.delete: a node pool of a
// tenant's cluster.
type NodePoolRef struct {
	TenantID   string `json:"tenantId" validate:"token"`
	ClusterID  string `json:"clusterId" validate:"clusterid"`
	NodePoolID string `json:"nodePoolId" validate:"nodepoolid"`
}

// DecodeNodePoolRef decodes and validates the body of
// kubernetesNodePools.delete. Any problem is an *errs.Error of kind
// errs.Invalid.
func DecodeNodePoolRef(body []byte) (*NodePoolRef, error) {
	n := &NodePoolRef{}
	err := decode(body, func(f *fields) {
		n.TenantID, _ = f.str("tenantId", true, false)
		n.ClusterID, _ = f.str("clusterId", true, false)
		n.NodePoolID, _ = f.str("nodePoolId", true, false)
		f.rest(unknown)
		f.r.check("", n)
	})
	if err != nil {
		return nil, err
	}
	return n, nil
}

// UpdateNodePool is the body of kubernetesNodePools.update: a resize.
type UpdateNodePool struct {
	TenantID   string `json:"tenantId" validate:"token"`
	ClusterID  string `json:"clusterId" validate:"clusterid"`
	NodePoolID string `json:"nodePoolId" validate:"nodepoolid"`
	// NodeCount is nil when the body leaves it unchanged.
	NodeCount *int `json:"nodeCount" validate:"omitempty,between=0:1000"`
	// Autoscaling replaces the pool's when SetAutoscaling; nil with
	// SetAutoscaling (the body's "autoscaling": null) turns it off.
	Autoscaling    *Autoscaling `json:"autoscaling"`
	SetAutoscaling bool         `json:"-"`
}

const immutable = "cannot change: delete the node pool and create another"

// DecodeUpdateNodePool decodes and validates the body of
// kubernetesNodePools.update: at least one of nodeCount and autoscaling,
// and no field of the pool that never changes. Any problem is an
// *errs.Error of kind errs.Invalid. Whether the result fits the stored pool
// is Apply's to say.
func DecodeUpdateNodePool(body []byte) (*UpdateNodePool, error) {
	u := &UpdateNodePool{}
	err := decode(body, func(f *fields) {
		u.TenantID, _ = f.str("tenantId", true, false)
		u.ClusterID, _ = f.str("clusterId", true, false)
		u.NodePoolID, _ = f.str("nodePoolId", true, false)
		if n, ok := f.int("nodeCount", false); ok {
			u.NodeCount = &n
		}
		if v, ok := f.get("autoscaling", false); ok {
			u.SetAutoscaling = true
			if v != nil {
				if a := asObject(f.r, "autoscaling", v); a != nil {
					u.Autoscaling = decodeAutoscaling(a)
				}
			}
		}
		if !f.present("nodeCount") && !f.present("autoscaling") {
			f.r.add("nodeCount", "at least one of nodeCount and autoscaling is required")
		}
		f.rest(func(key string) string {
			if nodePoolSpecKeys[key] {
				return immutable
			}
			return "unknown field"
		})
		f.r.check("", u)
		if u.NodeCount != nil {
			checkBounds(f.r, "", *u.NodeCount, u.Autoscaling)
		} else if u.Autoscaling != nil && f.r.ok("autoscaling.minNodes") && f.r.ok("autoscaling.maxNodes") &&
			u.Autoscaling.MinNodes > u.Autoscaling.MaxNodes {
			f.r.add("autoscaling.minNodes", fmt.Sprintf("must not be above autoscaling.maxNodes (%d)", u.Autoscaling.MaxNodes))
		}
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// Apply returns the stored pool's spec p resized as u asks: nodeCount
// replaced when given, autoscaling replaced (or removed) when given. The
// result shares no memory with p or u. It is INVALID_INPUT when the
// resulting nodeCount lies outside the resulting autoscaling bounds,
// naming the input field to change.
func (u *UpdateNodePool) Apply(p model.NodePoolSpec) (model.NodePoolSpec, error) {
	out := p
	out.Zones = slices.Clone(p.Zones)
	out.Labels = maps.Clone(p.Labels)
	out.Taints = slices.Clone(p.Taints)
	if p.Accelerators != nil {
		a := *p.Accelerators
		out.Accelerators = &a
	}
	if p.Autoscaling != nil {
		a := *p.Autoscaling
		out.Autoscaling = &a
	}
	if u.NodeCount != nil {
		out.NodeCount = *u.NodeCount
	}
	if u.SetAutoscaling {
		out.Autoscaling = nil
		if u.Autoscaling != nil {
			out.Autoscaling = &resource.Autoscaling{MinNodes: u.Autoscaling.MinNodes, MaxNodes: u.Autoscaling.MaxNodes}
		}
	}
	a := out.Autoscaling
	if a == nil || (a.MinNodes <= out.NodeCount && out.NodeCount <= a.MaxNodes) {
		return out, nil
	}
	var fe errs.FieldError
	switch {
	case u.NodeCount != nil:
		fe = errs.FieldError{Field: "nodeCount", Reason: fmt.Sprintf(
			"must be between the pool's autoscaling.minNodes (%d) and autoscaling.maxNodes (%d)", a.MinNodes, a.MaxNodes)}
	case out.NodeCount < a.MinNodes:
		fe = errs.FieldError{Field: "autoscaling.minNodes", Reason: fmt.Sprintf(
			"must not be above the pool's nodeCount (%d): lower it or give a nodeCount too", out.NodeCount)}
	default:
		fe = errs.FieldError{Field: "autoscaling.maxNodes", Reason: fmt.Sprintf(
			"must not be below the pool's nodeCount (%d): raise it or give a nodeCount too", out.NodeCount)}
	}
	return model.NodePoolSpec{}, errs.InvalidFields([]errs.FieldError{fe})
}

// canonical marshals v, whose maps json sorts by key and whose structs have
// a fixed field order.
func canonical(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Plain structs of strings, numbers and bools always marshal.
		panic(fmt.Sprintf("input: canonical %T: %v", v, err))
	}
	return b
}
