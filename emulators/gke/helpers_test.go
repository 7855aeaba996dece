package gke

import (
	"context"
	"testing"
	"time"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"
)

// opTime is the operation time of test servers, on their fake clock.
const opTime = 10 * time.Second

const (
	project  = "proj"
	region   = "us-central1"
	parent   = "projects/proj/locations/us-central1"
	zoneA    = "us-central1-a"
	zoneB    = "us-central1-b"
	zoneF    = "us-central1-f"
	clusterN = "projects/proj/locations/us-central1/clusters/c1"
)

type env struct {
	srv    *Server
	client *container.ClusterManagerClient
	clock  *testingclock.FakeClock
	ctx    context.Context
}

// newEnv starts a server on a fake clock and connects the official client.
func newEnv(t *testing.T, opts ...Option) *env {
	t.Helper()
	clock := testingclock.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	srv, err := NewServer(append([]Option{WithClock(clock), WithOperationTime(opTime)}, opts...)...)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return &env{srv: srv, client: newEnvClient(t, srv), clock: clock, ctx: context.Background()}
}

// newEnvClient connects the official client to srv.
func newEnvClient(t *testing.T, srv *Server) *container.ClusterManagerClient {
	t.Helper()
	client, err := dial(srv)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// dial connects the official client to srv, as a program would.
func dial(srv *Server) (*container.ClusterManagerClient, error) {
	return container.NewClusterManagerClient(context.Background(),
		option.WithEndpoint(srv.Addr()),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
}

func pool(name, machine string, count int32, zones ...string) *containerpb.NodePool {
	return &containerpb.NodePool{Name: name, InitialNodeCount: count, Locations: zones, Config: &containerpb.NodeConfig{MachineType: machine}}
}

// createCluster creates c1 in us-central1 with the given pools (one e2
// pool "p0" in zone a when none) and waits for it to be RUNNING.
func (e *env) createCluster(t *testing.T, pools ...*containerpb.NodePool) *containerpb.Cluster {
	t.Helper()
	if len(pools) == 0 {
		pools = []*containerpb.NodePool{pool("p0", "e2-standard-4", 1, zoneA)}
	}
	op, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{Name: "c1", NodePools: pools}})
	if err != nil {
		t.Fatalf("CreateCluster: %v", err)
	}
	e.wait(t, op)
	c, err := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: clusterN})
	if err != nil {
		t.Fatalf("GetCluster: %v", err)
	}
	return c
}

// wait advances the clock past op's end and returns it DONE.
func (e *env) wait(t *testing.T, op *containerpb.Operation) *containerpb.Operation {
	t.Helper()
	e.clock.Step(opTime)
	got, err := e.client.GetOperation(e.ctx, &containerpb.GetOperationRequest{Name: parent + "/operations/" + op.Name})
	if err != nil {
		t.Fatalf("GetOperation(%s): %v", op.Name, err)
	}
	if got.Status != containerpb.Operation_DONE {
		t.Fatalf("GetOperation(%s).Status = %v after the operation time, want DONE", op.Name, got.Status)
	}
	return got
}

func (e *env) getPool(t *testing.T, name string) *containerpb.NodePool {
	t.Helper()
	np, err := e.client.GetNodePool(e.ctx, &containerpb.GetNodePoolRequest{Name: clusterN + "/nodePools/" + name})
	if err != nil {
		t.Fatalf("GetNodePool(%s): %v", name, err)
	}
	return np
}

func code(err error) codes.Code { return status.Code(err) }

// waitTimeout bounds every wait of these tests: generous, for a loaded
// 2-core machine; a condition that holds returns as soon as it does.
const waitTimeout = 2 * time.Minute

// waitFor polls cond until it reports true, and otherwise fails t, after
// waitTimeout or shortly before the test binary's own deadline, naming
// what it waited for and what cond last saw. The emulators' tests wait
// with apimachinery's poller rather than the product's shared/wait: an
// emulator knows nothing of the product, its tests included.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	waitWithin(t, waitTimeout, what, cond)
}

// waitWithin is waitFor with its own bound.
func waitWithin(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if end, ok := t.Deadline(); ok {
		timeout = min(timeout, time.Until(end)-10*time.Second)
	}
	start := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var ok bool
		ok, last = cond()
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waited %v for %s; last: %s", time.Since(start).Round(time.Millisecond), what, last)
	}
}

// waitUntil is waitFor for a condition with nothing to say but whether it
// holds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitFor(t, what, func() (bool, string) { return cond(), "it did not hold" })
}
