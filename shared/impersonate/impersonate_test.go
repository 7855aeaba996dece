package impersonate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	credentials "cloud.google.com/go/iam/credentials/apiv1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	testingclock "k8s.io/utils/clock/testing"

	iamemu "github.com/better-compute/kubernetes/emulators/iamcredentials"
	"github.com/better-compute/kubernetes/shared/impersonate"
	"github.com/better-compute/kubernetes/shared/wait"
)

const (
	reconciler  = "reconciler@bc-dev.iam.gserviceaccount.com"
	provisioner = "bc-provisioner@acme-prod.iam.gserviceaccount.com"
	other       = "bc-provisioner@globex-prod.iam.gserviceaccount.com"
	rpc         = "GenerateAccessToken"
)

// setup starts the IAM Credentials emulator on clk, where the reconciler
// may impersonate the provisioner, and Tokens over the official client
// calling as the reconciler.
func setup(t *testing.T, opts ...impersonate.Option) (*impersonate.Tokens, *iamemu.Server, *testingclock.FakeClock) {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	srv, err := iamemu.NewServer(iamemu.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	srv.Grant(provisioner, reconciler)
	c, err := credentials.NewIamCredentialsClient(context.Background(), srv.ClientOptions(srv.IssueToken(reconciler, 100*time.Hour))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	toks, err := impersonate.New(c, append([]impersonate.Option{impersonate.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return toks, srv, clk
}

// A token is kept until the margin before its expiry, then replaced; each
// account has its own.
func TestTokenCachedUntilNearExpiry(t *testing.T) {
	toks, srv, clk := setup(t)
	srv.Grant(other, reconciler)
	ctx := context.Background()
	first, err := toks.Token(ctx, provisioner)
	if err != nil {
		t.Fatalf("Token = %v", err)
	}
	if who, ok := srv.Identify(first.AccessToken); !ok || who != provisioner {
		t.Fatalf("the token stands for %q (%v), want %q", who, ok, provisioner)
	}
	if want := clk.Now().Add(impersonate.DefaultLifetime); !first.Expiry.Equal(want) {
		t.Errorf("Expiry = %v, want %v", first.Expiry, want)
	}
	// Just before the margin: the same token, no call.
	clk.Step(impersonate.DefaultLifetime - impersonate.DefaultMargin - time.Second)
	again, err := toks.Token(ctx, provisioner)
	if err != nil || again.AccessToken != first.AccessToken {
		t.Errorf("Token before the margin = %v, %v; want the cached one", again, err)
	}
	if n := srv.Calls(rpc); n != 1 {
		t.Errorf("%s calls = %d, want 1", rpc, n)
	}
	// Another account has a token of its own.
	o, err := toks.Token(ctx, other)
	if err != nil || o.AccessToken == first.AccessToken {
		t.Errorf("Token(other) = %v, %v; want a token of its own", o, err)
	}
	// Within the margin: a new one.
	clk.Step(2 * time.Second)
	renewed, err := toks.Token(ctx, provisioner)
	if err != nil || renewed.AccessToken == first.AccessToken {
		t.Errorf("Token within the margin = %v, %v; want a new token", renewed, err)
	}
	if n := srv.Calls(rpc); n != 3 {
		t.Errorf("%s calls = %d, want 3", rpc, n)
	}
}

// Callers asking at once share one mint.
func TestTokenConcurrentCallersShareOneMint(t *testing.T) {
	toks, srv, _ := setup(t)
	// Long enough that every caller arrives while the mint is in flight.
	srv.SetLatency(rpc, 200*time.Millisecond)
	const callers = 32
	got := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			tok, err := toks.Token(context.Background(), provisioner)
			errs[i] = err
			if err == nil {
				got[i] = tok.AccessToken
			}
		})
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil || got[i] != got[0] {
			t.Errorf("caller %d: %q, %v; want %q", i, got[i], errs[i], got[0])
		}
	}
	if n := srv.Calls(rpc); n != 1 {
		t.Errorf("%s calls = %d, want 1", rpc, n)
	}
}

// A waiter that gives up returns at once; when the caller that minted
// gives up, a waiter still waiting mints for itself.
func TestTokenCallersGivingUp(t *testing.T) {
	toks, srv, _ := setup(t)
	srv.SetLatency(rpc, 300*time.Millisecond)
	leaderCtx, cancelLeader := context.WithCancel(context.Background())
	leaderDone := make(chan error, 1)
	go func() {
		_, err := toks.Token(leaderCtx, provisioner)
		leaderDone <- err
	}()
	// The waiters start once the leader's call is in flight.
	wait.Until(t, "the first call", func() bool { return srv.Calls(rpc) == 1 })

	quitter, cancelQuitter := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelQuitter()
	start := time.Now()
	if _, err := toks.Token(quitter, provisioner); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Token of a waiter that gives up = %v, want its deadline", err)
	}
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Errorf("a waiter that gives up waited %v, want about 50ms", d)
	}

	waiter := make(chan error, 1)
	go func() {
		_, err := toks.Token(context.Background(), provisioner)
		waiter <- err
	}()
	cancelLeader()
	if err := <-leaderDone; err == nil {
		t.Errorf("Token of the leader that gave up = nil error")
	}
	if err := <-waiter; err != nil {
		t.Errorf("Token of the waiter left behind = %v, want a token of its own", err)
	}
	if n := srv.Calls(rpc); n != 2 {
		t.Errorf("%s calls = %d, want 2 (the leader's, the waiter's)", rpc, n)
	}
}

// A refusal is not cached: once the grant returns, the next call gets a
// token. Refused tells it from errors that pass by themselves.
func TestTokenRefused(t *testing.T) {
	toks, srv, _ := setup(t)
	ctx := context.Background()
	srv.Revoke(provisioner, reconciler)
	_, err := toks.Token(ctx, provisioner)
	if status.Code(err) != codes.PermissionDenied || !impersonate.Refused(err) {
		t.Fatalf("Token without the grant = %v (Refused %v), want PermissionDenied", err, impersonate.Refused(err))
	}
	srv.Grant(provisioner, reconciler)
	if _, err := toks.Token(ctx, provisioner); err != nil {
		t.Errorf("Token once granted again = %v", err)
	}
	if impersonate.Refused(status.Error(codes.Unavailable, "down")) {
		t.Errorf("Refused(Unavailable) = true")
	}
}

func TestNewRefusesBadLifetimes(t *testing.T) {
	for _, tc := range []struct{ lifetime, margin time.Duration }{
		{0, 0}, {2 * time.Hour, time.Minute}, {time.Minute, time.Minute}, {time.Minute, -time.Second},
	} {
		if _, err := impersonate.New(fakeless{}, impersonate.WithLifetime(tc.lifetime, tc.margin)); err == nil {
			t.Errorf("New(lifetime %v, margin %v) = nil error", tc.lifetime, tc.margin)
		}
	}
}

// fakeless is a Generator never called: New only checks its options.
type fakeless struct{ impersonate.Generator }
