package cloudrun

import (
	"context"
	"fmt"
	"net/http"

	compute "cloud.google.com/go/compute/apiv1"
	"google.golang.org/api/option"

	"github.com/better-compute/kubernetes/shared/clusters"
)

// nodeCounts is how the reconciler reads the nodes of the pools' instance
// groups (currentNodeCount): Compute Engine's REST API as the service's
// own identity, and with tenants (impersonation on) a second client with
// no identity, whose calls carry the tenant's account's token. None on
// the GKE emulator without the simulator's Compute endpoint.
func (c *cloud) nodeCounts(tenants bool) (*clusters.NodeCounts, error) {
	emu := c.cfg.ComputeEmulatorHost
	if c.cfg.GKEEmulatorHost != "" && emu == "" {
		return nil, nil
	}
	bg := context.Background()
	var own, anon []option.ClientOption
	if emu != "" {
		endpoint := option.WithEndpoint("http://" + emu)
		own = []option.ClientOption{endpoint, option.WithoutAuthentication()}
		if tok := c.cfg.EmulatorAccessToken; tok != "" {
			own = []option.ClientOption{endpoint, option.WithHTTPClient(&http.Client{Transport: bearerTransport(tok)})}
		}
		anon = []option.ClientOption{endpoint, option.WithoutAuthentication()}
	} else {
		anon = []option.ClientOption{option.WithoutAuthentication()}
	}
	oc, err := compute.NewInstanceGroupManagersRESTClient(bg, own...)
	if err != nil {
		return nil, fmt.Errorf("Compute Engine client: %w", err)
	}
	c.onClose(oc.Close)
	// One aggregated list per project answers its clusters' runs for a
	// tenth of the steady interval, as the cluster listings do.
	nc := &clusters.NodeCounts{Compute: oc, TTL: c.cfg.SteadyInterval / 10}
	if tenants {
		tc, err := compute.NewInstanceGroupManagersRESTClient(bg, anon...)
		if err != nil {
			return nil, fmt.Errorf("Compute Engine client for tenants' projects: %w", err)
		}
		c.onClose(tc.Close)
		nc.Tenants = tc
	}
	return nc, nil
}

// bearerTransport presents an emulator's access token on every request,
// over its plain HTTP.
type bearerTransport string

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(t))
	return http.DefaultTransport.RoundTrip(r)
}
