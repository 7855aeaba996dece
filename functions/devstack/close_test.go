package devstack_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/functions/devstack"
)

// TestCloseWithAnUnusedConnection closes a stack while a client holds a
// connection to it on which it never sent a request, as Go's http.Transport
// leaves one when a request it dialed for goes on another connection.
// Close must neither wait for it nor fail.
func TestCloseWithAnUnusedConnection(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := devstack.Start(ctx, fastConfig())
	if err != nil {
		t.Fatalf("devstack.Start: %v", err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	defer conn.Close()
	// The server has taken the connection in once it answers another.
	resp, err := http.Get(s.URL + "/healthz")
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	resp.Body.Close()
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("Close with an unused connection = %v, want nil", err)
	}
	// net/http alone would wait five to six seconds for the connection.
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %v with an unused connection, want it closed at once", d)
	}
}
