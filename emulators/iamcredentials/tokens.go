package iamcredentials

import (
	"context"
	"strings"
	"time"

	"cloud.google.com/go/iam/credentials/apiv1/credentialspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// DefaultLifetime is the lifetime of a token when the request gives none,
// and the longest one may ask for.
const DefaultLifetime = time.Hour

// denied is the real API's refusal, for a missing grant and for a service
// account that does not exist alike.
const denied = "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist)."

// GenerateAccessToken mints an access token of the service account named
// projects/-/serviceAccounts/{email} for a caller holding
// roles/iam.serviceAccountTokenCreator on it, directly or through the
// request's chain of delegates.
func (g *GServer) GenerateAccessToken(ctx context.Context, req *credentialspb.GenerateAccessTokenRequest) (*credentialspb.GenerateAccessTokenResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	caller, err := g.caller(ctx)
	if err != nil {
		return nil, err
	}
	target, err := accountOf(req.GetName())
	if err != nil {
		return nil, err
	}
	chain := make([]string, 0, len(req.GetDelegates())+1)
	for _, d := range req.GetDelegates() {
		email, err := accountOf(d)
		if err != nil {
			return nil, err
		}
		chain = append(chain, email)
	}
	chain = append(chain, target)
	if len(req.GetScope()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "Scope required.")
	}
	lifetime := DefaultLifetime
	if l := req.GetLifetime(); l != nil {
		lifetime = l.AsDuration()
		if !l.IsValid() || lifetime < time.Second || lifetime > DefaultLifetime {
			return nil, status.Errorf(codes.InvalidArgument, "The lifetime %s is not between 1s and %ds.", l.AsDuration(), int(DefaultLifetime.Seconds()))
		}
	}
	// Each link of the chain mints the next one's token: the caller the
	// first delegate's, ..., the last delegate the target's.
	who := caller
	for _, sa := range chain {
		if !g.grants[sa][who] {
			g.log.Info("Refusing an access token", "caller", caller, "serviceAccount", target, "missing", who+" on "+sa)
			return nil, status.Error(codes.PermissionDenied, denied)
		}
		who = sa
	}
	tok, exp := g.issue(target, lifetime)
	return &credentialspb.GenerateAccessTokenResponse{AccessToken: tok, ExpireTime: timestamppb.New(exp)}, nil
}

// accountOf returns the email of a service account resource name,
// projects/-/serviceAccounts/{email}.
func accountOf(name string) (string, error) {
	rest, ok := strings.CutPrefix(name, "projects/-/serviceAccounts/")
	if !ok || !strings.Contains(rest, "@") || strings.Contains(rest, "/") {
		return "", status.Errorf(codes.InvalidArgument, "Invalid resource name %q: want projects/-/serviceAccounts/{email} (the - wildcard is required).", name)
	}
	return rest, nil
}
