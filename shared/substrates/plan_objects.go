package substrates

import (
	"slices"

	"github.com/better-compute/kubernetes/shared/kubeapply"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// planObjects applies bcd's objects in the cluster's Kubernetes API, with
// a join token (minted when the substrate has none), unless it holds them
// as the spec asks already; then the substrate is ready and follows its
// nodes, once no pool is being replaced. A ready substrate whose objects
// are held is confirmed by reading only: the run writes nothing to the
// cluster. A new generation that asks for the objects the cluster holds
// (the pool's event changed nothing of them) is applied already: only
// its status says so.
func (p *planner) planObjects() {
	s := &p.d.Substrate
	seen := p.in.Seen
	if seen == nil {
		p.d.Observe = true
		return
	}
	if !seen.Held || s.Status.Token.Hash == "" {
		p.act(Action{Kind: ApplyObjects, Mint: s.Status.Token.Hash == ""})
		return
	}
	s.Status.Applied = s.Spec.Generation
	p.planNodes()
	if p.planRetire() {
		p.d.ready()
	}
}

// desiredObjects are bcd's objects as d's substrate asks for them, on the
// node pools d lists (during a replacement, the old and the new), pools
// being the cluster's node pools: what a run applies and what a preview
// checks (kubeapply.Validate), one model of both.
func desiredObjects(d *Decision, pools []model.NodePool, cfg Config) kubeapply.Desired {
	s := &d.Substrate
	o := kubeapply.Desired{PoolID: s.PoolID, Image: cfg.Image, JoinURL: cfg.JoinURL}
	// Tolerated: the flavors' taints, and those of the pools they replace.
	var specs []model.NodePoolSpec
	for _, f := range s.Spec.Flavors {
		specs = append(specs, f.NodePool)
	}
	for _, np := range s.Status.NodePools {
		o.NodePools = append(o.NodePools, np.Name)
		for _, p := range pools {
			if p.ID == np.NodePoolID {
				specs = append(specs, p.Spec)
			}
		}
	}
	seen := map[resource.Taint]bool{}
	for _, spec := range specs {
		taints := spec.Taints
		if spec.Accelerators != nil {
			// GKE taints the nodes of GPU pools itself.
			taints = append(slices.Clone(taints), gpuTaint)
		}
		for _, t := range taints {
			if !seen[t] {
				seen[t] = true
				o.Tolerations = append(o.Tolerations, t)
			}
		}
	}
	return o
}
