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
