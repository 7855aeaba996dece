package substrates

import (
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/resource"
)

// planNodes notes the joined nodes that are no longer among the Nodes of
// the substrate's pools: they leave (kubernetes.substrate.node.left).
func (p *planner) planNodes() {
	present := make(map[string]bool, len(p.in.Seen.Nodes))
	for _, k := range p.in.Seen.Nodes {
		present[k.Name] = true
	}
	for _, n := range p.in.Seen.Joined {
		if !present[n.Name] {
			p.leave(n)
		}
	}
}

// leave records that a joined node left.
func (p *planner) leave(n resource.SubstrateNode) {
	p.d.Left = append(p.d.Left, n.Name)
	view := p.d.Substrate.View()
	view.JoinedNodes -= int64(len(p.d.Left))
	p.d.Events = append(p.d.Events, event.ForSubstrateNode(event.SubstrateNodeLeft, view, n, p.d.now))
}
