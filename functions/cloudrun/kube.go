package cloudrun

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/better-compute/kubernetes/shared/impersonate"
	"github.com/better-compute/kubernetes/shared/kubeapply"
	"github.com/better-compute/kubernetes/shared/substrates"
)

// kubeConnector reaches the substrates' clusters through kubeapply as
// each cluster's account: the function's own identity in the platform's
// projects (its Google OAuth token in production, which GKE accepts; its
// emulator token, or the static one configured, on the emulators), and
// the impersonated service account in a tenant's project, with that
// account's tokens, minted as the clusters' GKE calls' are
// (impersonate.Identity).
type kubeConnector struct {
	own oauth2.TokenSource
	// tenants is whom the substrates act as in tenants' projects; its
	// Tokens are nil when the deployment impersonates no one.
	tenants impersonate.Identity
}

// newKubeConnector returns the connector: with cfg's static token when one
// is configured, else its emulator access token, else the function's
// Google credentials.
func newKubeConnector(cfg Config, tokens *impersonate.Tokens) *kubeConnector {
	k := &kubeConnector{tenants: impersonate.Identity{Tokens: tokens, Caller: cfg.ReconcilerServiceAccount}}
	static := cfg.KubernetesToken
	if static == "" && cfg.GKEEmulatorHost != "" {
		static = cfg.EmulatorAccessToken
	}
	if static != "" {
		k.own = oauth2.StaticTokenSource(&oauth2.Token{AccessToken: static, TokenType: "Bearer"})
	} else {
		k.own = &googleToken{}
	}
	return k
}

// googleToken is the function's Google OAuth token, its credentials found
// on first use: a function that never reaches a cluster needs none.
type googleToken struct {
	once sync.Once
	ts   oauth2.TokenSource
	err  error
}

func (g *googleToken) Token() (*oauth2.Token, error) {
	g.once.Do(func() {
		ts, err := google.DefaultTokenSource(context.Background(), "https://www.googleapis.com/auth/cloud-platform")
		if err != nil {
			g.err = fmt.Errorf("google credentials for the clusters' Kubernetes APIs: %w", err)
			return
		}
		g.ts = oauth2.ReuseTokenSource(nil, ts)
	})
	if g.err != nil {
		return nil, g.err
	}
	return g.ts.Token()
}

func (k *kubeConnector) Connect(t substrates.Target) (substrates.KubeAPI, error) {
	ts := k.own
	if t.Impersonate != "" {
		ts = k.tenants.TokenSource(t.Project, t.Impersonate)
	}
	c, err := kubeapply.Connect(kubeapply.Target{Endpoint: t.Endpoint, CAPEM: t.CAPEM, Token: ts})
	if err != nil {
		return nil, err
	}
	return c, nil
}
