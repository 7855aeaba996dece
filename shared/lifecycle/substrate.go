package lifecycle

import (
	"slices"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// A substrate is stored as the clusters are: a spec that only its pool's
// events write, and a status that only its runs write, whole (API.md §9).

// SameChoice reports whether two specs put the substrate on the same
// account and cluster: a change of either builds a new substrate.
func SameChoice(a, b model.SubstrateSpec) bool {
	return a.AccountID == b.AccountID && a.Mode == b.Mode && a.Region == b.Region &&
		slices.Equal(a.Zones, b.Zones) && a.ReleaseChannel == b.ReleaseChannel &&
		a.AdoptClusterID == b.AdoptClusterID
}

// NodeJoined is what node n joining the substrate s announces, once:
// kubernetes.substrate.node.joined, about s's cluster.
func NodeJoined(s *model.Substrate, n resource.SubstrateNode) []event.Event {
	return []event.Event{event.ForSubstrateNode(event.SubstrateNodeJoined, s.View(), n, n.JoinedAt)}
}
