package substrates

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/input"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

func TestJoinResult(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, JoinOK},
		{errs.E(errs.Unauthenticated, "the join token is unknown or revoked"), JoinUnauthenticated},
		{errs.E(errs.PermissionDenied, "node n is not a Node of cluster c"), JoinDenied},
		{errs.E(errs.Unavailable, "the Kubernetes API of cluster c cannot be reached yet"), JoinError},
		{errs.E(errs.InvalidState, "substrate s has no cluster yet"), JoinError},
		{errors.New("decode join token"), JoinError},
	} {
		if got := joinResult(c.err); got != c.want {
			t.Errorf("joinResult(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// A run that applies a newer generation and leaves the substrate ready
// converged the change that asked for it; any other run, none.
func TestSubstrateConverged(t *testing.T) {
	asked := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sub := func(st resource.State, applied int64) Substrate {
		return Substrate{Spec: Spec{Generation: 2, UpdatedAt: asked}, Status: Status{State: st, Applied: applied}}
	}
	for _, c := range []struct {
		name          string
		before, after Substrate
		want          time.Time
	}{
		{"first ready", sub(resource.StateProvisioning, 0), sub(resource.StateReady, 2), asked},
		{"a change applied while ready", sub(resource.StateReady, 1), sub(resource.StateReady, 2), asked},
		{"steady", sub(resource.StateReady, 2), sub(resource.StateReady, 2), time.Time{}},
		{"back from the cluster's upgrade", sub(resource.StateUpdating, 2), sub(resource.StateReady, 2), time.Time{}},
		{"applied but failed", sub(resource.StateUpdating, 1), sub(resource.StateError, 2), time.Time{}},
	} {
		u := &run{before: c.before, s: c.after}
		if got := u.converged(); !got.Equal(c.want) {
			t.Errorf("%s: converged %v, want %v", c.name, got, c.want)
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
type nodes map[string]Node

func (n nodes) Connect(string, []byte) (KubeAPI, error)       { return n, nil }
func (nodes) Apply(context.Context, Objects) error            { return nil }
func (nodes) Check(context.Context, Objects) (bool, error)    { return true, nil }
func (nodes) Remove(context.Context, string) (bool, error)    { return true, nil }
func (nodes) Nodes(context.Context, []string) ([]Node, error) { return nil, nil }
func (n nodes) Node(_ context.Context, name string) (Node, error) {
	if nd, ok := n[name]; ok {
		return nd, nil
	}
	return Node{}, ErrNoNode
}

type sent struct{}

func (sent) Send([]outbox.Event) {}

// Each join call is counted once by its result, whether the token check
// (Verify) or the join itself refused it.
func TestJoinCounts(t *testing.T) {
	ctx := context.Background()
	_, fs, _ := newConsumer(t)
	st, err := store.New(fs)
	if err != nil {
		t.Fatal(err)
	}
	counts := &joinCounts{n: map[string]int{}}
	kube := nodes{"node-1": {Name: "node-1", NodePool: "bc-cpu", Zone: "us-central1-a"}}
	j, err := NewJoiner(st, kube, sent{}, nil, WithJoinMetrics(counts))
	if err != nil {
		t.Fatal(err)
	}
	const token = "bcj_test"
	hash := HashToken(token)
	if _, err := tokenRef(fs, hash).Set(ctx, tokenGrant{TenantID: "acme", SubstrateID: "ksb_1", PoolID: "pool-gpu"}); err != nil {
		t.Fatal(err)
	}
	s := Substrate{ID: "ksb_1", TenantID: "acme", PoolID: "pool-gpu", Active: true,
		Spec:   Spec{Flavors: []Flavor{{Name: "cpu", NodePool: lifecycle.NodePoolSpec{Name: "bc-cpu"}}}},
		Status: Status{ClusterID: "kcl_1"}}
	if _, err := substrateRef(fs, "acme", "ksb_1").Set(ctx, s); err != nil {
		t.Fatal(err)
	}
	c := lifecycle.Cluster{ID: "kcl_1", TenantID: "acme", Status: lifecycle.ClusterStatus{Endpoint: "203.0.113.1", CACertificate: "Y2E="}}
	if _, err := st.ClusterRef("acme", "kcl_1").Set(ctx, c); err != nil {
		t.Fatal(err)
	}

	call := func(authorization, node string) {
		principal, err := j.Verify(ctx, authorization)
		if err != nil {
			return // answered by the edge; Join is not called
		}
		_, _ = j.Join(ctx, principal, &input.Join{NodeName: node})
	}
	call("Basic x", "node-1")
	call("Bearer bcj_unknown", "node-1")
	call("Bearer "+token, "node-2")
	call("Bearer "+token, "node-1")
	call("Bearer "+token, "node-1") // joined already: ok again
	want := map[string]int{JoinUnauthenticated: 2, JoinDenied: 1, JoinOK: 2}
	if !maps.Equal(counts.n, want) {
		t.Errorf("join calls counted %v, want %v", counts.n, want)
	}
}
