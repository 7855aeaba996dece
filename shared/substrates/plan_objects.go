package substrates

// planObjects applies bcd's objects in the cluster's Kubernetes API, with
// a join token (minted when the substrate has none), unless it holds them
// as the spec asks already; then the substrate is ready and follows its
// nodes, once no pool is being replaced. A ready substrate whose objects are as applied is confirmed by
// reading only: the run writes nothing.
func (p *planner) planObjects() {
	s := &p.d.Substrate
	seen := p.in.Seen
	if seen == nil {
		p.d.Observe = true
		return
	}
	if !seen.Held || s.Status.Token.Hash == "" || s.Status.Applied != s.Spec.Generation {
		p.act(Action{Kind: ApplyObjects, Mint: s.Status.Token.Hash == ""})
		return
	}
	p.planNodes()
	if p.planRetire() {
		p.d.ready()
	}
}
