package firestore

import (
	"context"
	"testing"
	"time"

	gfs "cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const testDB = "projects/test-project/databases/(default)"

// newTestServer starts an emulator and returns it with a client connected
// over gRPC. Extra options go to NewServer.
func newTestServer(t testing.TB, opts ...Option) (*Server, *gfs.Client) {
	t.Helper()
	srv, err := NewServer(opts...)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv, newClient(t, srv, "test-project")
}

// newClient connects an official client for project to srv.
func newClient(t testing.TB, srv *Server, project string) *gfs.Client {
	t.Helper()
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient(%s): %v", srv.Addr, err)
	}
	c, err := gfs.NewClient(context.Background(), project, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatalf("firestore.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
