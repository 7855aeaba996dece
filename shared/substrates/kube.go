package substrates

import (
	"context"

	"github.com/better-compute/kubernetes/shared/kubeapply"
)

// KubeAPI is what the substrates ask of one cluster's Kubernetes API
// (kubeapply.Cluster).
type KubeAPI interface {
	// Apply server-side applies d. It fails with an error wrapping
	// kubeapply.ErrJoinSecretMissing when d.Token is empty and the Secret
	// is missing or emptied, and with one holding a
	// *kubeapply.ForeignError when an object of the same name is not the
	// pool's.
	Apply(ctx context.Context, d kubeapply.Desired) (kubeapply.Applied, error)
	// Check reports, reading only, whether the cluster holds d as Apply
	// leaves it (d.Token aside, its Secret holding a token).
	Check(ctx context.Context, d kubeapply.Desired) (bool, error)
	// Remove deletes the pool's objects; gone is true once they are all
	// gone (deletion begun counts).
	Remove(ctx context.Context, poolID string) (gone bool, err error)
	// Nodes lists the Nodes of the node pools.
	Nodes(ctx context.Context, nodePools []string) ([]kubeapply.Node, error)
	// Node returns one Node, an error wrapping kubeapply.ErrNodeNotFound
	// when there is none.
	Node(ctx context.Context, name string) (kubeapply.Node, error)
}

var _ KubeAPI = (*kubeapply.Cluster)(nil)

// Connector reaches a cluster's Kubernetes API at the endpoint GKE
// reports, trusting its CA (PEM).
type Connector interface {
	Connect(endpoint string, caPEM []byte) (KubeAPI, error)
}
