package substrates

import (
	"slices"

	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
)

// planNodes notes the joined nodes that are no longer among the Nodes of
// the substrate's pools: they leave (kubernetes.substrate.node.left).
func (p *planner) planNodes() {
	for _, n := range p.in.Seen.Joined {
		if !slices.Contains(p.in.Seen.Nodes, n.Name) {
			p.leave(n)
		}
	}
}

// leave records that a joined node left.
func (p *planner) leave(n resource.SubstrateNode) {
	p.d.Left = append(p.d.Left, n.Name)
	view := p.d.Substrate.View()
	view.JoinedNodes -= int64(len(p.d.Left))
	p.d.Events = append(p.d.Events, outbox.SubstrateNodeEvent(outbox.SubstrateNodeLeft, view, n, p.d.now))
}
