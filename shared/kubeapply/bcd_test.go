package kubeapply

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"golang.org/x/oauth2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/emulators/kubesim"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// The objects Apply writes are the ones bcd runs from: in a cluster of the
// GKE simulator, whose bcd reads the DaemonSet and its Secret by bcd's own
// names (API.md §9), never the product's, every Node of the substrate's
// node pools joins, with the token applied and its own name, and no other
// Node does. A name the product gets wrong (the namespace, the DaemonSet,
// an environment variable, the Secret's key) joins no node and fails here.
func TestAppliedObjectsJoinNodes(t *testing.T) {
	srv, cluster := gkeCluster(t,
		&containerpb.NodePool{Name: "bc-pool-gpu-l4", InitialNodeCount: 2, Config: &containerpb.NodeConfig{
			MachineType: "e2-standard-4",
			Taints:      []*containerpb.NodeTaint{{Key: "nvidia.com/gpu", Value: "present", Effect: containerpb.NodeTaint_NO_SCHEDULE}},
		}},
		&containerpb.NodePool{Name: "tenant", InitialNodeCount: 1, Config: &containerpb.NodeConfig{MachineType: "e2-standard-4"}},
	)
	acc, err := srv.KubernetesAccess(cluster)
	if err != nil {
		t.Fatalf("KubernetesAccess: %v", err)
	}
	c, err := connect(Target{
		Endpoint: acc.Endpoint,
		CAPEM:    acc.CAPEM,
		Token:    oauth2.StaticTokenSource(&oauth2.Token{AccessToken: acc.AdminToken}),
	}, 1000, 1000)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	ctx := t.Context()
	var nodes []Node
	wait.For(t, "the substrate's Nodes registered", func() (bool, string) {
		nodes, err = c.Nodes(ctx, []string{"bc-pool-gpu-l4"})
		if err != nil {
			return false, err.Error()
		}
		return len(nodes) == 2, fmt.Sprintf("%d Nodes", len(nodes))
	})

	js := newJoins(t)
	d := Desired{
		PoolID:      "pool-gpu",
		Image:       "example.com/bcd:1",
		JoinURL:     js.URL + "/join",
		NodePools:   []string{"bc-pool-gpu-l4"},
		Tolerations: []resource.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}},
		Token:       "t0ken",
	}
	if _, err := c.Apply(ctx, d); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want := map[string]string{}
	for _, n := range nodes {
		want[n.Name] = "t0ken " + n.ProviderID
	}
	wait.For(t, "bcd's join calls from the substrate's Nodes", func() (bool, string) {
		got := js.calls()
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("joins %v, want %v", got, want)
	})
}

// gkeCluster starts the GKE simulator with Kubernetes and creates a
// cluster of the given node pools in it, returning its name once it runs.
func gkeCluster(t *testing.T, pools ...*containerpb.NodePool) (*gke.Server, string) {
	t.Helper()
	log := kubesim.TestLogger(t)
	srv, err := gke.NewServer(
		gke.WithOperationTime(20*time.Millisecond),
		gke.WithLogger(log),
		gke.WithKubernetes(gke.Kubernetes{
			Binary:       func(ctx context.Context) (string, error) { return kubesim.Binary(ctx, log) },
			Dir:          t.TempDir(),
			SyncInterval: 100 * time.Millisecond,
		}),
	)
	if err != nil {
		t.Fatalf("gke.NewServer: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	client, err := container.NewClusterManagerClient(t.Context(),
		option.WithEndpoint(srv.Addr()),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatalf("dial the GKE simulator: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })

	const parent = "projects/proj/locations/us-central1-a"
	for _, p := range pools {
		p.Locations = []string{"us-central1-a"}
	}
	op, err := client.CreateCluster(t.Context(), &containerpb.CreateClusterRequest{Parent: parent,
		Cluster: &containerpb.Cluster{Name: "c1", NodePools: pools}})
	if err != nil {
		t.Fatalf("CreateCluster: %v", err)
	}
	wait.For(t, "the cluster created", func() (bool, string) {
		got, err := client.GetOperation(t.Context(), &containerpb.GetOperationRequest{Name: parent + "/operations/" + op.Name})
		if err != nil {
			return false, err.Error()
		}
		if got.Status == containerpb.Operation_DONE && got.GetError() != nil {
			t.Fatalf("CreateCluster failed: %v", got.GetError())
		}
		return got.Status == containerpb.Operation_DONE, got.Status.String()
	})
	return srv, parent + "/clusters/c1"
}

// joins is a join method that records bcd's calls: for each node name,
// the bearer token and the providerId it was called with.
type joins struct {
	*httptest.Server
	mu  sync.Mutex
	got map[string]string
}

func newJoins(t *testing.T) *joins {
	js := &joins{got: map[string]string{}}
	js.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			NodeName   string `json:"nodeName"`
			ProviderID string `json:"providerId"`
		}
		if r.Method != http.MethodPost || r.URL.Path != "/join" || json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		js.mu.Lock()
		js.got[body.NodeName] = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + " " + body.ProviderID
		js.mu.Unlock()
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(js.Close)
	return js
}

// calls is what the join method was called with so far.
func (js *joins) calls() map[string]string {
	js.mu.Lock()
	defer js.mu.Unlock()
	return maps.Clone(js.got)
}
