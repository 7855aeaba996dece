package cloudrun

import (
	"context"
	"fmt"
	"sync"
	"time"

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
// account's tokens, minted as the clusters' GKE calls' are.
type kubeConnector struct {
	own oauth2.TokenSource
	// tokens mints the tenants' accounts' tokens; nil when the
	// deployment impersonates no one.
	tokens *impersonate.Tokens
	// caller is the reconciler's service account, named in what a tenant
	// must grant.
	caller string
}

// newKubeConnector returns the connector: with cfg's static token when one
// is configured, else its emulator access token, else the function's
// Google credentials.
func newKubeConnector(cfg Config, tokens *impersonate.Tokens) *kubeConnector {
	k := &kubeConnector{tokens: tokens, caller: cfg.ReconcilerServiceAccount}
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
		ts = &tenantToken{k: k, project: t.Project, account: t.Impersonate}
	}
	c, err := kubeapply.Connect(kubeapply.Target{Endpoint: t.Endpoint, CAPEM: t.CAPEM, Token: ts})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// mintTimeout bounds one mint of a tenant's token: client-go asks for a
// token without a context of its own.
const mintTimeout = 30 * time.Second

// tenantToken is the token of a tenant's service account, asked of
// impersonate.Tokens for each request: it keeps the token until near its
// expiry, then mints the next, so that a long run never presents an
// expired one.
type tenantToken struct {
	k                *kubeConnector
	project, account string
}

func (t *tenantToken) Token() (*oauth2.Token, error) {
	if t.k.tokens == nil {
		return nil, &substrates.AccessError{
			Guidance: fmt.Sprintf("Better Compute cannot act in project %s: this deployment cannot impersonate %s", t.project, t.account),
			Err:      fmt.Errorf("impersonation is not configured"),
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), mintTimeout)
	defer cancel()
	tok, err := t.k.tokens.Token(ctx, t.account)
	if impersonate.Refused(err) {
		return nil, &substrates.AccessError{Guidance: impersonate.Guidance(t.project, t.account, t.k.caller), Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("impersonate %s: %w", t.account, err)
	}
	return tok, nil
}
