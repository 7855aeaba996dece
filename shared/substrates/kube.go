package substrates

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/better-compute/kubernetes/shared/kubeapply"
	"github.com/better-compute/kubernetes/shared/lifecycle"
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

// Target is one cluster's Kubernetes API and the identity its calls go
// out with.
type Target struct {
	// Endpoint and CAPEM are the cluster's endpoint, as GKE reports it,
	// and its CA (PEM).
	Endpoint string
	CAPEM    []byte
	// Project is the cluster's project.
	Project string
	// Impersonate, when set, is the tenant's service account that the
	// cluster's account acts as in Project (lifecycle.ClusterSpec's): every
	// call carries an access token of that account, as the clusters'
	// GKE calls do, since the platform's own identity has no access in a
	// tenant's project. Empty: the platform's own identity.
	Impersonate string
}

// Connector reaches a cluster's Kubernetes API. When the identity cannot
// be had for a reason only the account's owner can fix (the tenant
// revoked its grant), the calls of the KubeAPI fail with an error
// wrapping an *AccessError.
type Connector interface {
	Connect(t Target) (KubeAPI, error)
}

// AccessError says that the substrate's cluster cannot be reached as its
// account's identity, for a reason only the account's owner can fix.
type AccessError struct {
	// Guidance says what the owner must grant, to whom.
	Guidance string
	Err      error
}

func (e *AccessError) Error() string { return e.Guidance + ": " + e.Err.Error() }
func (e *AccessError) Unwrap() error { return e.Err }

// TargetOf is how to reach c's Kubernetes API as its account.
func TargetOf(c *lifecycle.Cluster) (Target, error) {
	ca, err := base64.StdEncoding.DecodeString(c.Status.CACertificate)
	if err != nil {
		return Target{}, fmt.Errorf("cluster %s: its CA certificate is not base64: %w", c.ID, err)
	}
	if c.Status.Endpoint == "" || len(ca) == 0 {
		return Target{}, fmt.Errorf("cluster %s has no endpoint or CA yet", c.ID)
	}
	return Target{Endpoint: c.Status.Endpoint, CAPEM: ca, Project: c.Spec.Project, Impersonate: c.Spec.Impersonate}, nil
}

// accessRefused is the substrate's error when a call to its cluster's
// Kubernetes API failed for want of a grant only the owner of the
// cluster's project can make, "" for any other failure. It is worded as
// the cluster's own error is shown (planCluster), so that a substrate
// whose cluster goes into error for the same grant shows, and announces,
// one error.
func accessRefused(c *lifecycle.Cluster, err error) string {
	if err == nil || c == nil {
		return ""
	}
	if ae, ok := errors.AsType[*AccessError](err); ok {
		return fmt.Sprintf("cluster %s: %s", c.Spec.Name, ae.Guidance)
	}
	if c.Spec.Impersonate != "" && (apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err)) {
		return fmt.Sprintf("cluster %s: Better Compute cannot act in project %s as %s: the cluster's Kubernetes API refused it (%s); grant it the roles of Better Compute's tenant module (infra/tenant) in %s",
			c.Spec.Name, c.Spec.Project, c.Spec.Impersonate, apiMessage(err), c.Spec.Project)
	}
	return ""
}

// apiMessage is the Kubernetes API's own message of err.
func apiMessage(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return se.Status().Message
	}
	return err.Error()
}
