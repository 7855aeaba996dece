package cloudrun

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/better-compute/kubernetes/shared/kubeapply"
	"github.com/better-compute/kubernetes/shared/substrates"
)

// kubeConnector reaches the substrates' clusters through kubeapply with
// one identity: the function's Google OAuth token in production (GKE
// accepts it), or the devstack's static token for its simulated clusters.
type kubeConnector struct {
	token oauth2.TokenSource
}

// newKubeConnector returns the connector with a static token when one is
// configured (the devstack), else the function's Google credentials.
func newKubeConnector(ctx context.Context, static string) (*kubeConnector, error) {
	if static != "" {
		return &kubeConnector{token: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: static, TokenType: "Bearer"})}, nil
	}
	return &kubeConnector{token: &googleToken{}}, nil
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

func (k *kubeConnector) Connect(endpoint string, caPEM []byte) (substrates.KubeAPI, error) {
	c, err := kubeapply.Connect(kubeapply.Target{Endpoint: endpoint, CAPEM: caPEM, Token: k.token})
	if err != nil {
		return nil, err
	}
	return c, nil
}
