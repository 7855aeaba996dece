package clusters

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/googleapis/gax-go/v2"
	"golang.org/x/oauth2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/impersonate"
	"github.com/better-compute/kubernetes/shared/lifecycle"
)

// Impersonation is how the reconciler acts in a tenant's own project: a
// cluster whose account names a service account to impersonate
// (lifecycle.ClusterSpec.Impersonate) is observed and changed only as that
// account.
type Impersonation struct {
	// GKE is a client that carries no credentials of its own: each call
	// carries the impersonated account's token, so that one connection
	// serves every tenant's project.
	GKE GKE
	// Tokens mints the impersonated accounts' access tokens
	// (impersonate.Tokens, which keeps each until near its expiry).
	Tokens Tokens
	// Caller is the reconciler's own service account, the one tenants
	// grant roles/iam.serviceAccountTokenCreator: named in the error a
	// cluster shows when the grant is missing.
	Caller string
	// Insecure lets the tokens travel over a connection without TLS: an
	// emulator's.
	Insecure bool
}

// Tokens mints access tokens of service accounts the reconciler
// impersonates.
type Tokens interface {
	Token(ctx context.Context, serviceAccount string) (*oauth2.Token, error)
}

// WithImpersonation makes the reconciler act in tenants' projects as the
// service accounts their accounts name, through im. Without it, a cluster
// of such an account shows an error saying so.
func WithImpersonation(im Impersonation) Option {
	return func(r *Reconciler) { r.imp = &im }
}

// accessError says that the reconciler cannot act in a cluster's project
// as its account, for a reason only the project's owner can fix (a grant
// revoked, a role removed). The cluster shows guidance as its error, and
// its chain goes on at the steady pace, so that it recovers by itself once
// the grant is back.
type accessError struct {
	guidance string
	err      error
}

func (e *accessError) Error() string { return e.guidance + ": " + e.err.Error() }
func (e *accessError) Unwrap() error { return e.err }

// errNoImpersonation: the deployment has no Impersonation.
var errNoImpersonation = errors.New("impersonation is not configured")

// provider returns the GKE client that acts in the cluster's project as
// its account: the reconciler's own for a platform account, the
// impersonated service account's for a tenant's. The token it carries is
// fresh for at least the tokens' margin, more than a run lasts. An
// *accessError is the tenant's to fix; any other error passes by itself.
func (r *Reconciler) provider(ctx context.Context, c *lifecycle.Cluster) (GKE, error) {
	sa := c.Spec.Impersonate
	if sa == "" {
		return r.gke, nil
	}
	if r.imp == nil {
		return nil, &accessError{guidance: fmt.Sprintf("Better Compute cannot act in project %s: this deployment cannot impersonate %s", c.Spec.Project, sa), err: errNoImpersonation}
	}
	tok, err := r.imp.Tokens.Token(ctx, sa)
	if impersonate.Refused(err) {
		return nil, &accessError{guidance: r.grantGuidance(c), err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("impersonate %s: %w", sa, err)
	}
	creds := grpc.PerRPCCredentials(bearer{token: tok.AccessToken, secure: !r.imp.Insecure})
	return withCallOptions{g: r.imp.GKE, opts: []gax.CallOption{gax.WithGRPCOptions(creds)}}, nil
}

// grantGuidance is what a tenant who revoked the reconciler's grant on
// its service account must grant again.
func (r *Reconciler) grantGuidance(c *lifecycle.Cluster) string {
	caller := ""
	if r.imp != nil {
		caller = r.imp.Caller
	}
	return impersonate.Guidance(c.Spec.Project, c.Spec.Impersonate, caller)
}

// refusedInProject turns the provider refusing a call in a tenant's
// project into an *accessError: the impersonated account lost its roles
// there. A platform account's refusal is about the platform's own grants,
// handled as before (a read retried unseen, for the operator's alert); nil
// when err is not such a refusal.
func refusedInProject(c *lifecycle.Cluster, err error) *accessError {
	if c.Spec.Impersonate == "" || status.Code(err) != codes.PermissionDenied {
		return nil
	}
	return &accessError{
		guidance: fmt.Sprintf("Better Compute cannot act in project %s as %s: the provider refused it (%s); grant it the roles of Better Compute's tenant module (infra/tenant) in %s",
			c.Spec.Project, c.Spec.Impersonate, providerMessage(err), c.Spec.Project),
		err: err,
	}
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
func (r *Reconciler) nodeServiceAccount(c *lifecycle.Cluster) string {
	switch {
	case c.Spec.NodeServiceAccount != "":
		return c.Spec.NodeServiceAccount
	case c.Spec.Impersonate != "":
		return ""
	}
	return r.nodeSA
}

// bearer is an access token sent as "authorization: Bearer" with one call.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }

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
