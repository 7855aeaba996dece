package cloudrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	return kubeAPI{c}, nil
}

// kubeAPI is kubeapply's cluster as the substrates' reconciler asks for it.
type kubeAPI struct{ c *kubeapply.Cluster }

// effects are the product's taint effects (Kubernetes' spelling, API.md
// §5) in kubeapply's (GKE's).
var effects = map[string]string{"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}

func (k kubeAPI) Apply(ctx context.Context, o substrates.Objects) error {
	_, err := k.c.Apply(ctx, desired(o))
	var foreign *kubeapply.ForeignError
	switch {
	case errors.As(err, &foreign):
		// Every foreign object is named, on one line.
		return fmt.Errorf("%w: %s", substrates.ErrForeign, strings.ReplaceAll(err.Error(), "\n", "; "))
	case errors.Is(err, kubeapply.ErrJoinSecretMissing):
		return fmt.Errorf("%w: %v", substrates.ErrSecretMissing, err)
	}
	return err
}

func (k kubeAPI) Check(ctx context.Context, o substrates.Objects) (bool, error) {
	return k.c.Check(ctx, desired(o))
}

func (k kubeAPI) Remove(ctx context.Context, poolID string) (bool, error) {
	return k.c.Remove(ctx, poolID)
}

func (k kubeAPI) Nodes(ctx context.Context, nodePools []string) ([]substrates.Node, error) {
	nodes, err := k.c.Nodes(ctx, nodePools)
	if err != nil {
		return nil, err
	}
	out := make([]substrates.Node, len(nodes))
	for i, n := range nodes {
		out[i] = substrates.Node(n)
	}
	return out, nil
}

func (k kubeAPI) Node(ctx context.Context, name string) (substrates.Node, error) {
	n, err := k.c.Node(ctx, name)
	if errors.Is(err, kubeapply.ErrNodeNotFound) {
		return substrates.Node{}, fmt.Errorf("%w: %v", substrates.ErrNoNode, err)
	}
	return substrates.Node(n), err
}

// desired is o as kubeapply takes it.
func desired(o substrates.Objects) kubeapply.Desired {
	d := kubeapply.Desired{PoolID: o.PoolID, Image: o.Image, JoinURL: o.JoinURL, NodePools: o.NodePools, Token: o.Token}
	for _, t := range o.Taints {
		d.Tolerations = append(d.Tolerations, kubeapply.Taint{Key: t.Key, Value: t.Value, Effect: effects[t.Effect]})
	}
	return d
}
