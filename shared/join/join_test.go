package join

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/kubeapply"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/substrates"
)

func TestJoinResult(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ResultOK},
		{errs.E(errs.Unauthenticated, "the join token is unknown or revoked"), ResultUnauthenticated},
		{errs.E(errs.PermissionDenied, "node n is not a Node of cluster c"), ResultDenied},
		{errs.E(errs.Unavailable, "the Kubernetes API of cluster c cannot be reached yet"), ResultError},
		{errs.E(errs.InvalidState, "substrate s has no cluster yet"), ResultError},
		{errors.New("decode join token"), ResultError},
	} {
		if got := joinResult(c.err); got != c.want {
			t.Errorf("joinResult(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

type joinCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *joinCounts) JoinCall(_ context.Context, result string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[result]++
}

// nodes is a cluster's Kubernetes API that has the Nodes it holds.
type nodes map[string]kubeapply.Node

func (n nodes) Connect(substrates.Target) (substrates.KubeAPI, error) { return n, nil }
func (nodes) Apply(context.Context, kubeapply.Desired) (kubeapply.Applied, error) {
	return kubeapply.Applied{}, nil
}
func (nodes) Check(context.Context, kubeapply.Desired) (bool, error)    { return true, nil }
func (nodes) Remove(context.Context, string) (bool, error)              { return true, nil }
func (nodes) Nodes(context.Context, []string) ([]kubeapply.Node, error) { return nil, nil }
func (n nodes) Node(_ context.Context, name string) (kubeapply.Node, error) {
	if nd, ok := n[name]; ok {
		return nd, nil
	}
	return kubeapply.Node{}, kubeapply.ErrNodeNotFound
}

type sent struct{}

func (sent) Send([]event.Event) {}

// Each join call is counted once by its result, whether the token check
// (Verify) or the join itself refused it.
func TestJoinCounts(t *testing.T) {
	ctx := context.Background()
	fs := fsemu.ForTest(t, "join")
	st, err := store.New(fs, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	counts := &joinCounts{n: map[string]int{}}
	kube := nodes{"node-1": {Name: "node-1", NodePool: "bc-cpu", Zone: "us-central1-a"}}
	j, err := New(st, kube, sent{}, WithMetrics(counts))
	if err != nil {
		t.Fatal(err)
	}
	const token = "bcj_test"
	hash := substrates.HashToken(token)
	// Fixtures, written where the store keeps them.
	if _, err := fs.Doc("joinTokens/"+hash).Set(ctx, store.JoinGrant{TenantID: "acme", SubstrateID: "ksb_1", PoolID: "pool-gpu"}); err != nil {
		t.Fatal(err)
	}
	s := model.Substrate{ID: "ksb_1", TenantID: "acme", PoolID: "pool-gpu", Active: true,
		Spec:   model.SubstrateSpec{Flavors: []model.Flavor{{Name: "cpu", NodePool: model.NodePoolSpec{Name: "bc-cpu"}}}},
		Status: model.SubstrateStatus{ClusterID: "kcl_1"}}
	if _, err := fs.Doc("tenants/acme/substrates/ksb_1").Set(ctx, s); err != nil {
		t.Fatal(err)
	}
	c := model.Cluster{ID: "kcl_1", TenantID: "acme", Status: model.ClusterStatus{Endpoint: "203.0.113.1", CACertificate: "Y2E="}}
	if _, err := fs.Doc("tenants/acme/clusters/kcl_1").Set(ctx, c); err != nil {
		t.Fatal(err)
	}

	call := func(authorization, node string) {
		principal, err := j.Verify(ctx, authorization)
		if err != nil {
			return // answered by the edge; Join is not called
		}
		_, _ = j.Join(ctx, principal, node, "")
	}
	call("Basic x", "node-1")
	call("Bearer bcj_unknown", "node-1")
	call("Bearer "+token, "node-2")
	call("Bearer "+token, "node-1")
	call("Bearer "+token, "node-1") // joined already: ok again
	// A node that is not the substrate's is refused with no word of the
	// cluster, the node's pool or its provider ID.
	principal, err := j.Verify(ctx, "Bearer "+token)
	if err != nil {
		t.Fatal(err)
	}
	kube["node-9"] = kubeapply.Node{Name: "node-9", NodePool: "tenants-own", Zone: "us-central1-a", ProviderID: "gce://p/us-central1-a/node-9"}
	_, err = j.Join(ctx, principal, "node-9", "gce://p/us-central1-a/node-9")
	if e, ok := errors.AsType[*errs.Error](err); !ok || e.Kind != errs.PermissionDenied || e.Message != "node node-9 is not one of the substrate's nodes" {
		t.Errorf("join of another pool's node = %v, want PERMISSION_DENIED saying only that it is not the substrate's", err)
	}
	want := map[string]int{ResultUnauthenticated: 2, ResultDenied: 2, ResultOK: 2}
	if !maps.Equal(counts.n, want) {
		t.Errorf("join calls counted %v, want %v", counts.n, want)
	}
}

// The joiner's store is the store.
var _ Store = (*store.Store)(nil)
