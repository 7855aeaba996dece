package cloudrun

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/iam/credentials/apiv1/credentialspb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/better-compute/kubernetes/shared/impersonate"
	"github.com/better-compute/kubernetes/shared/substrates"
)

// mintTokens is the IAM Credentials API for one service account: it
// mints tok-1, tok-2, ... while granted, and refuses as the API does
// otherwise.
type mintTokens struct {
	clock   clock.PassiveClock
	mu      sync.Mutex
	granted bool
	n       int
}

func (m *mintTokens) GenerateAccessToken(_ context.Context, req *credentialspb.GenerateAccessTokenRequest, _ ...gax.CallOption) (*credentialspb.GenerateAccessTokenResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.granted {
		return nil, status.Error(codes.PermissionDenied, "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).")
	}
	m.n++
	return &credentialspb.GenerateAccessTokenResponse{AccessToken: fmt.Sprintf("tok-%d", m.n),
		ExpireTime: timestamppb.New(m.clock.Now().Add(req.GetLifetime().AsDuration()))}, nil
}

func (m *mintTokens) grant(g bool) {
	m.mu.Lock()
	m.granted = g
	m.mu.Unlock()
}

// TestKubeConnectorIdentities checks who the substrates' calls go out as:
// the function's own token in the platform's projects, the impersonated
// tenant account's in a tenant's, a new one once it nears its expiry,
// and, when the tenant revoked the grant, an *impersonate.AccessError
// naming it.
func TestKubeConnectorIdentities(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[]}`)
	}))
	defer srv.Close()
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			return ""
		}
		return seen[len(seen)-1]
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	endpoint := strings.TrimPrefix(srv.URL, "https://")

	clk := testingclock.NewFakePassiveClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	gen := &mintTokens{clock: clk, granted: true}
	tokens, err := impersonate.New(gen, impersonate.WithClock(clk), impersonate.WithLifetime(time.Minute, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const reconciler = "reconciler@bc-dev.iam.gserviceaccount.com"
	k := newKubeConnector(Config{GKEEmulatorHost: "127.0.0.1:1", EmulatorAccessToken: "own-token", ReconcilerServiceAccount: reconciler}, tokens)
	ctx := context.Background()
	nodes := func(tgt substrates.Target) error {
		api, err := k.Connect(tgt)
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		_, err = api.Nodes(ctx, []string{"a"})
		return err
	}

	if err := nodes(substrates.Target{Endpoint: endpoint, CAPEM: ca, Project: "bc-dev"}); err != nil || last() != "Bearer own-token" {
		t.Errorf("a platform cluster: %v, sent %q; want the function's own token", err, last())
	}
	tenant := substrates.Target{Endpoint: endpoint, CAPEM: ca, Project: "acme-prod", Impersonate: "bc-provisioner@acme-prod.iam.gserviceaccount.com"}
	for _, want := range []string{"Bearer tok-1", "Bearer tok-1"} {
		if err := nodes(tenant); err != nil || last() != want {
			t.Errorf("a tenant's cluster: %v, sent %q; want %q", err, last(), want)
		}
	}
	clk.SetTime(clk.Now().Add(51 * time.Second)) // within the margin of its expiry
	if err := nodes(tenant); err != nil || last() != "Bearer tok-2" {
		t.Errorf("a tenant's cluster near the token's expiry: %v, sent %q; want a new token", err, last())
	}

	gen.grant(false)
	clk.SetTime(clk.Now().Add(time.Minute))
	mu.Lock()
	calls := len(seen)
	mu.Unlock()
	err = nodes(tenant)
	ae, ok := errors.AsType[*impersonate.AccessError](err)
	want := "Better Compute cannot act in project acme-prod: grant roles/iam.serviceAccountTokenCreator on bc-provisioner@acme-prod.iam.gserviceaccount.com to " + reconciler
	if !ok || ae.Guidance != want {
		t.Errorf("a tenant's cluster with the grant revoked = %v, want an AccessError %q", err, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != calls {
		t.Errorf("a request went out without the tenant's token")
	}

	// Without impersonation the deployment cannot reach a tenant's cluster.
	none := newKubeConnector(Config{KubernetesToken: "static"}, nil)
	api, err := none.Connect(tenant)
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.Nodes(ctx, []string{"a"})
	if ae, ok := errors.AsType[*impersonate.AccessError](err); !ok || !strings.Contains(ae.Guidance, "cannot impersonate") {
		t.Errorf("a tenant's cluster without impersonation = %v, want an AccessError saying so", err)
	}
}
