package iamcredentials_test

import (
	"context"
	"testing"
	"time"

	credentials "cloud.google.com/go/iam/credentials/apiv1"
	"cloud.google.com/go/iam/credentials/apiv1/credentialspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/better-compute/kubernetes/emulators/iamcredentials"
)

const (
	reconciler  = "reconciler@bc-dev.iam.gserviceaccount.com"
	provisioner = "bc-provisioner@acme-prod.iam.gserviceaccount.com"
	scope       = "https://www.googleapis.com/auth/cloud-platform"
)

func start(t *testing.T) (*iamcredentials.Server, *testingclock.FakeClock) {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	srv, err := iamcredentials.NewServer(iamcredentials.WithClock(clk))
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv, clk
}

// client is the official client calling as the holder of bearer.
func client(t *testing.T, srv *iamcredentials.Server, bearer string) *credentials.IamCredentialsClient {
	t.Helper()
	c, err := credentials.NewIamCredentialsClient(context.Background(), srv.ClientOptions(bearer)...)
	if err != nil {
		t.Fatalf("NewIamCredentialsClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func request(sa string) *credentialspb.GenerateAccessTokenRequest {
	return &credentialspb.GenerateAccessTokenRequest{Name: "projects/-/serviceAccounts/" + sa, Scope: []string{scope}}
}

// A granted caller gets a token of the service account, which the
// emulator identifies as the service account's until it expires; without
// the grant, the real API's refusal.
func TestGenerateAccessTokenFollowsGrants(t *testing.T) {
	srv, clk := start(t)
	ctx := context.Background()
	c := client(t, srv, srv.IssueToken(reconciler, 10*time.Hour))

	_, err := c.GenerateAccessToken(ctx, request(provisioner))
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("GenerateAccessToken before the grant = %v, want PermissionDenied", err)
	}
	if msg := status.Convert(err).Message(); msg != "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist)." {
		t.Errorf("refusal message = %q", msg)
	}

	srv.Grant(provisioner, reconciler)
	resp, err := c.GenerateAccessToken(ctx, request(provisioner))
	if err != nil {
		t.Fatalf("GenerateAccessToken after the grant: %v", err)
	}
	if got, want := resp.GetExpireTime().AsTime(), clk.Now().Add(time.Hour); !got.Equal(want) {
		t.Errorf("expireTime = %v, want %v (the default lifetime)", got, want)
	}
	if who, ok := srv.Identify(resp.GetAccessToken()); !ok || who != provisioner {
		t.Errorf("Identify(minted) = %q, %v; want %q, true", who, ok, provisioner)
	}

	srv.Revoke(provisioner, reconciler)
	if _, err := c.GenerateAccessToken(ctx, request(provisioner)); status.Code(err) != codes.PermissionDenied {
		t.Errorf("GenerateAccessToken after the revoke = %v, want PermissionDenied", err)
	}
	// A token minted before the revoke lives on until its expiry.
	if _, ok := srv.Identify(resp.GetAccessToken()); !ok {
		t.Errorf("a token minted before the revoke is no longer identified")
	}
	clk.Step(time.Hour)
	if who, ok := srv.Identify(resp.GetAccessToken()); ok {
		t.Errorf("Identify(expired) = %q, true; want false", who)
	}

	srv.Grant(provisioner, reconciler)
	req := request(provisioner)
	req.Lifetime = durationpb.New(10 * time.Minute)
	resp, err = c.GenerateAccessToken(ctx, req)
	if err != nil {
		t.Fatalf("GenerateAccessToken after granting again: %v", err)
	}
	if got, want := resp.GetExpireTime().AsTime(), clk.Now().Add(10*time.Minute); !got.Equal(want) {
		t.Errorf("expireTime = %v, want %v (the lifetime asked)", got, want)
	}
}

// Each delegate mints the next one's token: every link needs its grant.
func TestGenerateAccessTokenDelegates(t *testing.T) {
	srv, _ := start(t)
	ctx := context.Background()
	const middle = "broker@bc-dev.iam.gserviceaccount.com"
	c := client(t, srv, srv.IssueToken(reconciler, time.Hour))
	req := request(provisioner)
	req.Delegates = []string{"projects/-/serviceAccounts/" + middle}

	srv.Grant(middle, reconciler)
	if _, err := c.GenerateAccessToken(ctx, req); status.Code(err) != codes.PermissionDenied {
		t.Errorf("without the delegate's grant = %v, want PermissionDenied", err)
	}
	srv.Grant(provisioner, middle)
	resp, err := c.GenerateAccessToken(ctx, req)
	if err != nil {
		t.Fatalf("with both grants: %v", err)
	}
	if who, _ := srv.Identify(resp.GetAccessToken()); who != provisioner {
		t.Errorf("Identify = %q, want %q", who, provisioner)
	}
}

// What is not a well-formed, authenticated request is refused before any
// grant is read.
func TestGenerateAccessTokenRefusals(t *testing.T) {
	srv, clk := start(t)
	srv.Grant(provisioner, reconciler)
	ctx := context.Background()
	expiring := srv.IssueToken(reconciler, time.Minute)
	good := srv.IssueToken(reconciler, 10*time.Hour)
	clk.Step(time.Minute)
	long := request(provisioner)
	long.Lifetime = durationpb.New(2 * time.Hour)
	for _, tc := range []struct {
		name   string
		bearer string
		req    *credentialspb.GenerateAccessTokenRequest
		want   codes.Code
	}{
		{"no credential", "", request(provisioner), codes.Unauthenticated},
		{"unknown token", "ya29.forged", request(provisioner), codes.Unauthenticated},
		{"expired token", expiring, request(provisioner), codes.Unauthenticated},
		{"project instead of -", good, &credentialspb.GenerateAccessTokenRequest{Name: "projects/acme-prod/serviceAccounts/" + provisioner, Scope: []string{scope}}, codes.InvalidArgument},
		{"not an email", good, request("123456789"), codes.InvalidArgument},
		{"no scope", good, &credentialspb.GenerateAccessTokenRequest{Name: "projects/-/serviceAccounts/" + provisioner}, codes.InvalidArgument},
		{"lifetime over an hour", good, long, codes.InvalidArgument},
		{"no grant", good, request("other@acme-prod.iam.gserviceaccount.com"), codes.PermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client(t, srv, tc.bearer).GenerateAccessToken(ctx, tc.req)
			if got := status.Code(err); got != tc.want {
				t.Errorf("GenerateAccessToken = %v, want %v", err, tc.want)
			}
		})
	}
}

// FailNext fails calls before anything is checked, with the code and
// message given; a latency delays them; Calls counts them all.
func TestFaults(t *testing.T) {
	srv, _ := start(t)
	srv.Grant(provisioner, reconciler)
	c := client(t, srv, srv.IssueToken(reconciler, time.Hour))
	anonymous := client(t, srv, "")
	ctx := context.Background()
	srv.FailNext("GenerateAccessToken", 2, codes.Internal, "boom")
	if _, err := anonymous.GenerateAccessToken(ctx, request(provisioner)); status.Code(err) != codes.Internal || status.Convert(err).Message() != "boom" {
		t.Errorf("first call, without a credential = %v, want Internal \"boom\" before authentication", err)
	}
	if _, err := c.GenerateAccessToken(ctx, request(provisioner)); status.Code(err) != codes.Internal {
		t.Errorf("second call = %v, want Internal", err)
	}
	if _, err := c.GenerateAccessToken(ctx, request(provisioner)); err != nil {
		t.Errorf("third call = %v, want a token", err)
	}

	const latency = 100 * time.Millisecond
	srv.SetLatency("GenerateAccessToken", latency)
	begin := time.Now()
	if _, err := c.GenerateAccessToken(ctx, request(provisioner)); err != nil {
		t.Errorf("delayed call = %v, want a token", err)
	}
	if took := time.Since(begin); took < latency {
		t.Errorf("delayed call took %v, want at least %v", took, latency)
	}
	if n := srv.Calls("GenerateAccessToken"); n != 4 {
		t.Errorf("Calls = %d, want 4", n)
	}
}
