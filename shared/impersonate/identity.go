package impersonate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/googleapis/gax-go/v2"
	"github.com/googleapis/gax-go/v2/callctx"
	"golang.org/x/oauth2"
	"google.golang.org/grpc"
)

// Identity is whom the platform acts as in a tenant's own project: the
// service account the tenant names, with tokens minted by Tokens as the
// platform's Caller. Every call of the platform there goes out with one of
// those tokens, whatever it calls: GKE (CallOption), Compute Engine
// (WithToken) or the cluster's Kubernetes API (TokenSource). The zero
// Identity, of a deployment that impersonates no one, acts in no tenant's
// project: its every token is an *AccessError saying so.
type Identity struct {
	// Tokens mints and keeps the accounts' tokens; nil: impersonation is
	// not configured.
	Tokens *Tokens
	// Caller is the platform's own service account, the one tenants grant
	// roles/iam.serviceAccountTokenCreator on theirs: named in the
	// guidance when the grant is missing. Empty: described, not named.
	Caller string
}

// errNotConfigured: the deployment has no Tokens.
var errNotConfigured = errors.New("impersonation is not configured")

// Token returns a token of account for acting in project, fresh for at
// least the Tokens' margin. When only the project's owner can fix why
// there is none (the grant revoked, the account gone) or the deployment
// impersonates no one, the error is an *AccessError; any other error may
// pass by itself.
func (id Identity) Token(ctx context.Context, project, account string) (*oauth2.Token, error) {
	if id.Tokens == nil {
		return nil, &AccessError{
			Guidance: fmt.Sprintf("Better Compute cannot act in project %s: this deployment cannot impersonate %s", project, account),
			Err:      errNotConfigured,
		}
	}
	tok, err := id.Tokens.Token(ctx, account)
	if Refused(err) {
		return nil, &AccessError{Guidance: Guidance(project, account, id.Caller), Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("impersonate %s: %w", account, err)
	}
	return tok, nil
}

// MintTimeout bounds one token of a TokenSource: its callers (client-go)
// ask for a token without a context of their own.
const MintTimeout = 30 * time.Second

// TokenSource returns account's tokens for acting in project, as Token
// gives them, asked for each request: Tokens keeps a token until near its
// expiry, then mints the next, so that a long run never presents an
// expired one. For clients that take an oauth2.TokenSource, such as a
// cluster's Kubernetes API.
func (id Identity) TokenSource(project, account string) oauth2.TokenSource {
	return tokenSource{id: id, project: project, account: account}
}

type tokenSource struct {
	id               Identity
	project, account string
}

func (s tokenSource) Token() (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), MintTimeout)
	defer cancel()
	return s.id.Token(ctx, s.project, s.account)
}

// CallOption makes a gRPC call of a Google client (GKE) carry tok, so that
// one client without credentials of its own serves every tenant's project.
// Without secure the token may travel over a connection without TLS: an
// emulator's.
func CallOption(tok *oauth2.Token, secure bool) gax.CallOption {
	return gax.WithGRPCOptions(grpc.PerRPCCredentials(bearer{token: tok.AccessToken, secure: secure}))
}

// WithToken returns ctx whose REST calls of a Google client (Compute
// Engine) carry tok in their authorization header.
func WithToken(ctx context.Context, tok *oauth2.Token) context.Context {
	return callctx.SetHeaders(ctx, "authorization", "Bearer "+tok.AccessToken)
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

// AccessError says that the platform cannot act in a tenant's project as
// the account the tenant names, for a reason only the project's owner can
// fix. Guidance is what the owner must grant, to whom: what a cluster or
// substrate of that account shows as its error, while its chain goes on
// at the steady pace, so that it recovers by itself once the grant is
// back.
type AccessError struct {
	Guidance string
	Err      error
}

func (e *AccessError) Error() string { return e.Guidance + ": " + e.Err.Error() }
func (e *AccessError) Unwrap() error { return e.Err }

// Guidance is what the owner of project must grant again when the
// platform, caller, may no longer impersonate serviceAccount there. An
// empty caller is described rather than named.
func Guidance(project, serviceAccount, caller string) string {
	if caller == "" {
		caller = "Better Compute's reconciler service account"
	}
	return fmt.Sprintf("Better Compute cannot act in project %s: grant %s on %s to %s", project, TokenCreator, serviceAccount, caller)
}

// RolesRefused is the error when service (the provider, a cluster's
// Kubernetes API) refused serviceAccount itself in project, saying
// message: the account lost the roles the tenant's module (infra/tenant)
// gives it there.
func RolesRefused(project, serviceAccount, service, message string, err error) *AccessError {
	return &AccessError{
		Guidance: fmt.Sprintf("Better Compute cannot act in project %s as %s: %s refused it (%s); grant it the roles of Better Compute's tenant module (infra/tenant) in %s",
			project, serviceAccount, service, message, project),
		Err: err,
	}
}
