package substrates

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/better-compute/kubernetes/shared/impersonate"
	"github.com/better-compute/kubernetes/shared/kubeapply"
	"github.com/better-compute/kubernetes/shared/model"
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
	// cluster's account acts as in Project (model.ClusterSpec's): every
	// call carries an access token of that account, as the clusters'
	// GKE calls do, since the platform's own identity has no access in a
	// tenant's project. Empty: the platform's own identity.
	Impersonate string
}

// Connector reaches a cluster's Kubernetes API. When the identity cannot
// be had for a reason only the account's owner can fix (the tenant
// revoked its grant), the calls of the KubeAPI fail with an error
// wrapping an *impersonate.AccessError (impersonate.Identity.TokenSource).
type Connector interface {
	Connect(t Target) (KubeAPI, error)
}

// TargetOf is how to reach c's Kubernetes API as its account.
func TargetOf(c *model.Cluster) (Target, error) {
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
func accessRefused(c *model.Cluster, err error) string {
	if err == nil || c == nil {
		return ""
	}
	ae, ok := errors.AsType[*impersonate.AccessError](err)
	if !ok && c.Spec.Impersonate != "" && (apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err)) {
		ae, ok = impersonate.RolesRefused(c.Spec.Project, c.Spec.Impersonate, "the cluster's Kubernetes API", apiMessage(err), err), true
	}
	if ok {
		return fmt.Sprintf("cluster %s: %s", c.Spec.Name, ae.Guidance)
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
