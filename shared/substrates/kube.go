package substrates

import (
	"context"
	"errors"

	"github.com/better-compute/kubernetes/shared/resource"
)

// Objects is what a substrate applies in its cluster's Kubernetes API: the
// Namespace, ServiceAccount, Secret and DaemonSet of bcd.
type Objects struct {
	PoolID    string
	Image     string
	JoinURL   string
	NodePools []string // the GKE names of the substrate's node pools
	Taints    []resource.Taint
	// Token is set only when a new join token was just minted: the Secret
	// is written then, and only checked otherwise.
	Token string
}

// Node is a Node of a cluster's Kubernetes API.
type Node struct {
	Name       string
	NodePool   string // its cloud.google.com/gke-nodepool label
	Zone       string
	ProviderID string
}

// KubeAPI is one cluster's Kubernetes API (kubeapply over client-go).
type KubeAPI interface {
	// Apply server-side applies o. It fails with ErrSecretMissing when
	// o.Token is empty and the Secret is missing or emptied, and with an
	// error wrapping ErrForeign when an object of the same name is not
	// the pool's.
	Apply(ctx context.Context, o Objects) error
	// Check reports, reading only, whether the cluster holds o as Apply
	// leaves it (o.Token aside, its Secret holding a token).
	Check(ctx context.Context, o Objects) (bool, error)
	// Remove deletes the pool's objects; gone is true once they are all
	// gone (deletion begun counts).
	Remove(ctx context.Context, poolID string) (gone bool, err error)
	// Nodes lists the Nodes of the node pools.
	Nodes(ctx context.Context, nodePools []string) ([]Node, error)
	// Node returns one Node, ErrNoNode when there is none.
	Node(ctx context.Context, name string) (Node, error)
}

// Connector reaches a cluster's Kubernetes API at the endpoint GKE
// reports, trusting its CA (PEM).
type Connector interface {
	Connect(endpoint string, caPEM []byte) (KubeAPI, error)
}

// Errors of a KubeAPI.
var (
	ErrSecretMissing = errors.New("the join token's Secret is missing or empty")
	ErrForeign       = errors.New("an object of the same name is not the substrate's")
	ErrNoNode        = errors.New("no such Node")
)
