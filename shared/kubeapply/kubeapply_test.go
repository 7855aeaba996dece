package kubeapply

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/better-compute/kubernetes/emulators/kubesim"
)

// testCluster connects to a new API server as its administrator.
func testCluster(t *testing.T) (*Cluster, *kubesim.APIServer) {
	t.Helper()
	s := kubesim.ForTest(t)
	// Without Connect's rate limits: the tests' own reads would spend
	// them and make every test wait on the client's throttle.
	c, err := connect(Target{
		Endpoint: s.Endpoint,
		CAPEM:    s.CAPEM,
		Token:    oauth2.StaticTokenSource(&oauth2.Token{AccessToken: s.AdminToken}),
	}, 1000, 1000)
	if err != nil {
		t.Fatalf("Connect(%s) = %v", s.Endpoint, err)
	}
	return c, s
}

func TestConnectRefuses(t *testing.T) {
	ca := selfSignedPEM(t)
	ts := oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "x"})
	tests := []struct {
		name   string
		target Target
	}{
		{"empty endpoint", Target{CAPEM: ca, Token: ts}},
		{"scheme", Target{Endpoint: "https://10.0.0.1", CAPEM: ca, Token: ts}},
		{"path", Target{Endpoint: "10.0.0.1/api", CAPEM: ca, Token: ts}},
		{"no token source", Target{Endpoint: "10.0.0.1", CAPEM: ca}},
		{"no CA", Target{Endpoint: "10.0.0.1", Token: ts}},
		{"CA not PEM", Target{Endpoint: "10.0.0.1", CAPEM: []byte("LS0tLS1CRUdJTi"), Token: ts}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := Connect(tt.target); err == nil {
				t.Errorf("Connect(%+v) = %v, nil; want an error", tt.target, c)
			}
		})
	}
	c, err := Connect(Target{Endpoint: "10.0.0.1:443", CAPEM: ca, Token: ts})
	if err != nil || c == nil {
		t.Errorf("Connect(valid target) = %v, %v; want a cluster", c, err)
	}
}

// The token source is asked for the token of each request, so a token the
// server refused is not sent again; the server's certificate is verified
// against the target's CA.
func TestConnectAuth(t *testing.T) {
	_, s := testCluster(t)
	ctx := t.Context()

	var calls atomic.Int32
	src := tokenFunc(func() (*oauth2.Token, error) {
		if calls.Add(1) == 1 {
			return &oauth2.Token{AccessToken: "stale"}, nil
		}
		return &oauth2.Token{AccessToken: s.AdminToken}, nil
	})
	c, err := Connect(Target{Endpoint: s.Endpoint, CAPEM: s.CAPEM, Token: src})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Nodes(ctx, []string{"any"}); !apierrors.IsUnauthorized(err) {
		t.Errorf("Nodes with a stale token = %v, want Unauthorized", err)
	}
	if _, err := c.Nodes(ctx, []string{"any"}); err != nil {
		t.Errorf("Nodes after the token source gave a good token = %v, want nil", err)
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("token source asked %d times for 2 requests, want 2", got)
	}

	other, err := Connect(Target{Endpoint: s.Endpoint, CAPEM: selfSignedPEM(t), Token: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: s.AdminToken})})
	if err != nil {
		t.Fatal(err)
	}
	var unknown x509.UnknownAuthorityError
	if _, err := other.Nodes(ctx, []string{"any"}); !errors.As(err, &unknown) {
		t.Errorf("Nodes with another CA = %v, want x509.UnknownAuthorityError", err)
	}
}

type tokenFunc func() (*oauth2.Token, error)

func (f tokenFunc) Token() (*oauth2.Token, error) { return f() }

func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "another CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// wipe leaves the cluster without the substrate's objects, whoever's they
// are. The API server of the tests has no namespace controller, so it
// finalizes the Namespace itself, which makes the server delete it.
func wipe(t *testing.T, c *Cluster) {
	t.Helper()
	ctx := context.Background()
	core := c.client.CoreV1()
	deletes := []func() error{
		func() error {
			return c.client.AppsV1().DaemonSets(Namespace).Delete(ctx, DaemonSetName, metav1.DeleteOptions{})
		},
		func() error { return core.Secrets(Namespace).Delete(ctx, SecretName, metav1.DeleteOptions{}) },
		func() error {
			return core.ServiceAccounts(Namespace).Delete(ctx, ServiceAccountName, metav1.DeleteOptions{})
		},
	}
	for _, del := range deletes {
		if err := del(); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("wipe: %v", err)
		}
	}
	ns, err := core.Namespaces().Get(ctx, Namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatalf("wipe: %v", err)
	}
	if ns.DeletionTimestamp == nil {
		if err := core.Namespaces().Delete(ctx, Namespace, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("wipe: delete namespace: %v", err)
		}
		if ns, err = core.Namespaces().Get(ctx, Namespace, metav1.GetOptions{}); err != nil {
			t.Fatalf("wipe: %v", err)
		}
	}
	ns.Spec.Finalizers = nil
	if _, err := core.Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("wipe: finalize namespace: %v", err)
	}
	if _, err := core.Namespaces().Get(ctx, Namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("wipe: namespace after finalize: %v, want NotFound", err)
	}
}
