package impersonate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/googleapis/gax-go/v2"
	"github.com/googleapis/gax-go/v2/callctx"
	"golang.org/x/oauth2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/impersonate"
)

// The guidance a cluster and its substrate show: what the tenant must
// grant, to whom, in its words.
const (
	revoked      = "Better Compute cannot act in project acme-prod: grant roles/iam.serviceAccountTokenCreator on " + provisioner + " to " + reconciler
	notPossible  = "Better Compute cannot act in project acme-prod: this deployment cannot impersonate " + provisioner
	rolesRemoved = "Better Compute cannot act in project acme-prod as " + provisioner + ": the provider refused it (Required \"container.clusters.get\" permission(s)); grant it the roles of Better Compute's tenant module (infra/tenant) in acme-prod"
)

// Identity.Token tells the tenant's refusals, and a deployment that
// impersonates no one, from failures that pass by themselves: only the
// first are *AccessErrors, with what to grant.
func TestIdentityToken(t *testing.T) {
	toks, _, _ := setup(t)
	ctx := context.Background()
	id := impersonate.Identity{Tokens: toks, Caller: reconciler}

	tok, err := id.Token(ctx, "acme-prod", provisioner)
	if err != nil || tok.AccessToken == "" {
		t.Fatalf("Token with the grant = %v, %v; want a token", tok, err)
	}

	toks2, srv2, _ := setup(t) // an empty cache, so that the next call mints
	srv2.FailNext(rpc, 1, codes.Internal, "boom")
	_, err = impersonate.Identity{Tokens: toks2, Caller: reconciler}.Token(ctx, "acme-prod", provisioner)
	if _, ok := errors.AsType[*impersonate.AccessError](err); ok || status.Code(err) != codes.Internal {
		t.Errorf("Token when the API fails = %v, want its Internal error, not an AccessError", err)
	}

	srv2.Revoke(provisioner, reconciler)
	_, err = impersonate.Identity{Tokens: toks2, Caller: reconciler}.Token(ctx, "acme-prod", provisioner)
	ae, ok := errors.AsType[*impersonate.AccessError](err)
	if !ok || ae.Guidance != revoked || status.Code(err) != codes.PermissionDenied {
		t.Errorf("Token with the grant revoked = %v, want an AccessError %q wrapping PermissionDenied", err, revoked)
	}
	_, err = impersonate.Identity{Tokens: toks2}.Token(ctx, "acme-prod", provisioner)
	if ae, ok := errors.AsType[*impersonate.AccessError](err); !ok || ae.Guidance != impersonate.Guidance("acme-prod", provisioner, "") {
		t.Errorf("Token with the grant revoked, no caller named = %v", err)
	}

	_, err = impersonate.Identity{}.Token(ctx, "acme-prod", provisioner)
	if ae, ok := errors.AsType[*impersonate.AccessError](err); !ok || ae.Guidance != notPossible {
		t.Errorf("Token of a deployment that impersonates no one = %v, want an AccessError %q", err, notPossible)
	}
}

// TokenSource gives what Token gives, for clients that ask without a
// context (client-go): the cached token, then, once revoked and expired,
// the AccessError.
func TestIdentityTokenSource(t *testing.T) {
	toks, srv, clk := setup(t)
	id := impersonate.Identity{Tokens: toks, Caller: reconciler}
	ts := id.TokenSource("acme-prod", provisioner)
	first, err := ts.Token()
	if err != nil {
		t.Fatalf("TokenSource.Token = %v", err)
	}
	again, err := id.Token(context.Background(), "acme-prod", provisioner)
	if err != nil || again.AccessToken != first.AccessToken {
		t.Errorf("Token after TokenSource.Token = %v, %v; want the same token", again, err)
	}
	srv.Revoke(provisioner, reconciler)
	clk.Step(impersonate.DefaultLifetime)
	_, err = ts.Token()
	if ae, ok := errors.AsType[*impersonate.AccessError](err); !ok || ae.Guidance != revoked {
		t.Errorf("TokenSource.Token with the grant revoked = %v, want an AccessError %q", err, revoked)
	}
}

// A GKE call carries the token as gRPC credentials, requiring TLS unless
// told otherwise; a Compute Engine call carries it as its authorization
// header.
func TestTokenOnCalls(t *testing.T) {
	tok := &oauth2.Token{AccessToken: "ya29.x"}
	for _, secure := range []bool{true, false} {
		var s gax.CallSettings
		impersonate.CallOption(tok, secure).Resolve(&s)
		if len(s.GRPC) != 1 {
			t.Fatalf("CallOption resolves to %d gRPC options, want 1", len(s.GRPC))
		}
		creds, ok := s.GRPC[0].(grpc.PerRPCCredsCallOption)
		if !ok {
			t.Fatalf("CallOption's gRPC option is %T, want per-RPC credentials", s.GRPC[0])
		}
		md, err := creds.Creds.GetRequestMetadata(context.Background())
		if err != nil || md["authorization"] != "Bearer ya29.x" {
			t.Errorf("CallOption's metadata = %v, %v; want the bearer token", md, err)
		}
		if got := creds.Creds.RequireTransportSecurity(); got != secure {
			t.Errorf("CallOption(secure %v) requires TLS: %v", secure, got)
		}
	}
	h := callctx.HeadersFromContext(impersonate.WithToken(context.Background(), tok))
	if got := h["authorization"]; len(got) != 1 || got[0] != "Bearer ya29.x" {
		t.Errorf("WithToken's headers = %v, want the bearer token", h)
	}
}

// RolesRefused is the one wording of a service refusing the impersonated
// account itself, whichever service refused it.
func TestRolesRefused(t *testing.T) {
	cause := status.Error(codes.PermissionDenied, `Required "container.clusters.get" permission(s)`)
	ae := impersonate.RolesRefused("acme-prod", provisioner, "the provider", status.Convert(cause).Message(), cause)
	if ae.Guidance != rolesRemoved {
		t.Errorf("RolesRefused = %q\nwant %q", ae.Guidance, rolesRemoved)
	}
	if !errors.Is(ae, cause) || ae.Error() != rolesRemoved+": "+cause.Error() {
		t.Errorf("RolesRefused's error = %q, want the guidance wrapping its cause", ae.Error())
	}
}
