package clusters

import (
	"context"
	"errors"

	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/impersonate"
	"github.com/better-compute/kubernetes/shared/model"
)

// Impersonation is how the reconciler acts in a tenant's own project: a
// cluster whose account names a service account to impersonate
// (model.ClusterSpec.Impersonate) is observed and changed only as that
// account.
type Impersonation struct {
	// GKE is a client that carries no credentials of its own: each call
	// carries the impersonated account's token, so that one connection
	// serves every tenant's project.
	GKE GKE
	// Identity mints the impersonated accounts' tokens and names the
	// reconciler's own service account, the one tenants grant
	// roles/iam.serviceAccountTokenCreator, in the error a cluster shows
	// when the grant is missing.
	Identity impersonate.Identity
	// Insecure lets the tokens travel over a connection without TLS: an
	// emulator's.
	Insecure bool
}

// WithImpersonation makes the reconciler act in tenants' projects as the
// service accounts their accounts name, through im. Without it, a cluster
// of such an account shows an error saying so.
func WithImpersonation(im Impersonation) Option {
	return func(r *Reconciler) { r.imp = &im }
}

// identity is whom the reconciler acts as in tenants' projects: the zero
// Identity, which acts in none, without WithImpersonation.
func (r *Reconciler) identity() impersonate.Identity {
	if r.imp == nil {
		return impersonate.Identity{}
	}
	return r.imp.Identity
}

// provider returns the GKE client that acts in the cluster's project as
// its account: the reconciler's own for a platform account, the
// impersonated service account's for a tenant's. The token it carries is
// fresh for at least the tokens' margin, more than a run lasts. An
// *impersonate.AccessError is the tenant's to fix; any other error passes
// by itself.
func (r *Reconciler) provider(ctx context.Context, c *model.Cluster) (GKE, error) {
	if c.Spec.Impersonate == "" {
		return r.gke, nil
	}
	tok, err := r.identity().Token(ctx, c.Spec.Project, c.Spec.Impersonate)
	if err != nil {
		return nil, err
	}
	return withCallOptions{g: r.imp.GKE, opts: []gax.CallOption{impersonate.CallOption(tok, !r.imp.Insecure)}}, nil
}

// refusedInProject turns the provider refusing a call in a tenant's
// project into an *impersonate.AccessError: the impersonated account lost
// its roles there. A platform account's refusal is about the platform's
// own grants, handled as before (a read retried unseen, for the operator's
// alert); nil when err is not such a refusal.
func refusedInProject(c *model.Cluster, err error) *impersonate.AccessError {
	if c.Spec.Impersonate == "" || status.Code(err) != codes.PermissionDenied {
		return nil
	}
	return impersonate.RolesRefused(c.Spec.Project, c.Spec.Impersonate, "the provider", providerMessage(err), err)
}

// providerMessage is the message of the provider's status that err
// wraps: status.Convert of a wrapped error gives the whole chain's text.
func providerMessage(err error) string {
	if se, ok := errors.AsType[interface {
		error
		GRPCStatus() *status.Status
	}](err); ok {
		return se.GRPCStatus().Message()
	}
	return err.Error()
}

// nodeServiceAccount is what the nodes of the cluster run as: its
// account's nodes' account; else, in a tenant's project, GKE's default
// there (the platform's nodes' account lives in another project, which a
// tenant's project cannot use); else the reconciler's.
func (r *Reconciler) nodeServiceAccount(c *model.Cluster) string {
	switch {
	case c.Spec.NodeServiceAccount != "":
		return c.Spec.NodeServiceAccount
	case c.Spec.Impersonate != "":
		return ""
	}
	return r.nodeSA
}

// withCallOptions is a GKE client whose every call carries opts.
type withCallOptions struct {
	g    GKE
	opts []gax.CallOption
}

var _ GKE = withCallOptions{}

func (w withCallOptions) with(opts []gax.CallOption) []gax.CallOption {
	return append(append([]gax.CallOption(nil), w.opts...), opts...)
}

func (w withCallOptions) GetCluster(ctx context.Context, req *containerpb.GetClusterRequest, opts ...gax.CallOption) (*containerpb.Cluster, error) {
	return w.g.GetCluster(ctx, req, w.with(opts)...)
}

func (w withCallOptions) CreateCluster(ctx context.Context, req *containerpb.CreateClusterRequest, opts ...gax.CallOption) (*containerpb.Operation, error) {
	return w.g.CreateCluster(ctx, req, w.with(opts)...)
}

func (w withCallOptions) DeleteCluster(ctx context.Context, req *containerpb.DeleteClusterRequest, opts ...gax.CallOption) (*containerpb.Operation, error) {
	return w.g.DeleteCluster(ctx, req, w.with(opts)...)
}

func (w withCallOptions) CreateNodePool(ctx context.Context, req *containerpb.CreateNodePoolRequest, opts ...gax.CallOption) (*containerpb.Operation, error) {
	return w.g.CreateNodePool(ctx, req, w.with(opts)...)
}

func (w withCallOptions) DeleteNodePool(ctx context.Context, req *containerpb.DeleteNodePoolRequest, opts ...gax.CallOption) (*containerpb.Operation, error) {
	return w.g.DeleteNodePool(ctx, req, w.with(opts)...)
}

func (w withCallOptions) SetNodePoolSize(ctx context.Context, req *containerpb.SetNodePoolSizeRequest, opts ...gax.CallOption) (*containerpb.Operation, error) {
	return w.g.SetNodePoolSize(ctx, req, w.with(opts)...)
}

func (w withCallOptions) SetNodePoolAutoscaling(ctx context.Context, req *containerpb.SetNodePoolAutoscalingRequest, opts ...gax.CallOption) (*containerpb.Operation, error) {
	return w.g.SetNodePoolAutoscaling(ctx, req, w.with(opts)...)
}

func (w withCallOptions) GetOperation(ctx context.Context, req *containerpb.GetOperationRequest, opts ...gax.CallOption) (*containerpb.Operation, error) {
	return w.g.GetOperation(ctx, req, w.with(opts)...)
}

func (w withCallOptions) ListOperations(ctx context.Context, req *containerpb.ListOperationsRequest, opts ...gax.CallOption) (*containerpb.ListOperationsResponse, error) {
	return w.g.ListOperations(ctx, req, w.with(opts)...)
}

func (w withCallOptions) ListClusters(ctx context.Context, req *containerpb.ListClustersRequest, opts ...gax.CallOption) (*containerpb.ListClustersResponse, error) {
	return w.g.ListClusters(ctx, req, w.with(opts)...)
}
