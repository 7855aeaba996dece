package clusters_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"

	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/shared/clusters"
)

// bearerRT presents an access token on every request.
type bearerRT string

func (t bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(t))
	return http.DefaultTransport.RoundTrip(r)
}

// computeClient is the official Compute Engine REST client of cs,
// presenting tok on every call ("": none of its own).
func computeClient(t *testing.T, cs *gkeemu.ComputeServer, tok string) *compute.InstanceGroupManagersClient {
	t.Helper()
	opts := []option.ClientOption{option.WithEndpoint(cs.URL()), option.WithoutAuthentication()}
	if tok != "" {
		opts = []option.ClientOption{option.WithEndpoint(cs.URL()), option.WithHTTPClient(&http.Client{Transport: bearerRT(tok)})}
	}
	c, err := compute.NewInstanceGroupManagersRESTClient(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The pools' node counts are read as each cluster's account: the
// platform's in its project, the impersonated provisioner in the
// tenant's, whom the simulator's IAM alone lets list there.
func TestNodeCountsActAsTheirAccount(t *testing.T) {
	// The clients need the simulator, which newIAMEnv starts: they are
	// set once it runs.
	late, lateTenants := &lateCompute{}, &lateCompute{}
	e := newIAMEnv(t, clusters.WithNodeCounts(clusters.NodeCounts{Compute: late, Tenants: lateTenants, TTL: time.Minute}))
	cs, err := gkeemu.NewComputeServer(e.gke, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	late.c = computeClient(t, cs, e.iam.IssueToken(reconcilerSA, 100*time.Hour))
	lateTenants.c = computeClient(t, cs, "")

	for _, pool := range []string{"pool", "pool-t"} {
		c := e.create(t, pool, "c-"+pool)
		ps, err := e.st.ListNodePools(context.Background(), e.caller, c.ID)
		if err != nil || len(ps) != 1 {
			t.Fatalf("ListNodePools = %v, %v", ps, err)
		}
		if n := ps[0].CurrentNodeCount; n == nil || *n != 1 {
			t.Errorf("%s: currentNodeCount = %v, want 1 (one node in one zone)", pool, n)
		}
	}
	if n := cs.Calls(gkeemu.ComputeAggregatedList); n < 2 {
		t.Errorf("aggregatedList calls = %d, want one per project at least", n)
	}
}

// lateCompute is a Compute whose client is set after the reconciler is
// made.
type lateCompute struct {
	c *compute.InstanceGroupManagersClient
}

func (l *lateCompute) AggregatedList(ctx context.Context, req *computepb.AggregatedListInstanceGroupManagersRequest, opts ...gax.CallOption) *compute.InstanceGroupManagersScopedListPairIterator {
	return l.c.AggregatedList(ctx, req, opts...)
}
