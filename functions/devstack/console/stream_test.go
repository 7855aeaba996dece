package console_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/functions/devstack/console"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// clientFrom is an HTTP client whose connections come from the loopback
// address ip: another client, as the console counts them.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// openStream opens the stream at url with client, and answers its status
// and a func that closes it.
func openStream(t *testing.T, client *http.Client, url string) (int, string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return resp.StatusCode, resp.Header.Get("Retry-After") + " " + string(b), func() {}
	}
	closed := false
	stop := func() {
		if !closed {
			closed = true
			cancel()
			resp.Body.Close()
		}
	}
	t.Cleanup(stop)
	return resp.StatusCode, "", stop
}

// TestStreamsBounded: the console holds at most MaxStreamsPerClient
// streams of one client address (429 past them) and MaxStreams in all
// (503), each refusal saying why with a Retry-After; a stream closed
// gives its place back.
func TestStreamsBounded(t *testing.T) {
	fsc := fsemu.ForTest(t, "bc-dev")
	writeFleet(t, fsc, 4, 0, time.Now())
	c := newConsole(t, fsc, 0, func(o *console.Options) { o.MaxStreams, o.MaxStreamsPerClient = 3, 2 })
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	a, b := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")
	urls := []string{"/console/events/stream", "/console/fleet/stream", "/console/clusters/acme/kcl-0000/stream", "/console/substrates/acme/ksb-0000/stream"}

	code, _, closeA0 := openStream(t, a, srv.URL+urls[0])
	if code != http.StatusOK {
		t.Fatalf("first stream = %d, want 200", code)
	}
	if code, _, _ := openStream(t, a, srv.URL+urls[2]); code != http.StatusOK {
		t.Fatalf("second stream = %d, want 200", code)
	}
	for _, u := range urls {
		if code, why, _ := openStream(t, a, srv.URL+u); code != http.StatusTooManyRequests || !strings.Contains(why, "at most 2") || why[0] == ' ' {
			t.Errorf("a third stream of one client (%s) = %d %q, want 429 with Retry-After, saying at most 2", u, code, why)
		}
	}
	if code, _, _ := openStream(t, b, srv.URL+urls[1]); code != http.StatusOK {
		t.Fatalf("another client's stream = %d, want 200", code)
	}
	for _, u := range urls {
		if code, why, _ := openStream(t, b, srv.URL+u); code != http.StatusServiceUnavailable || !strings.Contains(why, "at most 3") || why[0] == ' ' {
			t.Errorf("a fourth stream in all (%s) = %d %q, want 503 with Retry-After, saying at most 3", u, code, why)
		}
	}
	closeA0()
	wait.Until(t, "the closed stream's place given back", func() bool { return c.OpenStreams() == 2 })
	if code, why, _ := openStream(t, b, srv.URL+urls[3]); code != http.StatusOK {
		t.Errorf("a stream once one closed = %d %s, want 200", code, why)
	}
}

// firestoreReads counts the Firestore reads of a client but its
// listeners' (Listen): the reads a page or a stream makes.
type firestoreReads struct{ n atomic.Int64 }

// isRead reports whether the Firestore method reads (not Listen).
func isRead(method string) bool {
	for _, m := range []string{"/GetDocument", "/BatchGetDocuments", "/RunQuery", "/RunAggregationQuery", "/ListDocuments", "/ListCollectionIds"} {
		if strings.HasSuffix(method, m) {
			return true
		}
	}
	return false
}

func (f *firestoreReads) options() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if isRead(method) {
				f.n.Add(1)
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			if isRead(method) {
				f.n.Add(1)
			}
			return streamer(ctx, desc, cc, method, opts...)
		}),
	}
}

// TestClusterStreamReadsOnlyOnChange: a cluster's stream reads nothing
// while its cluster does not change, however long (here, while another
// cluster changes 30 times, each change seen by the fleet's stream, at a
// poll of 2 ms), and sends the cluster again when it changes.
func TestClusterStreamReadsOnlyOnChange(t *testing.T) {
	reads := &firestoreReads{}
	fsc := fsemu.ForTest(t, "bc-dev", reads.options()...)
	writeFleet(t, fsc, 4, 0, time.Now())
	c := newConsole(t, fsc, 0, func(o *console.Options) { o.Poll = 2 * time.Millisecond })
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	if code, _ := get(t, c.Handler(), "/console"); code != http.StatusOK {
		t.Fatalf("GET /console = %d", code)
	}
	live := make(chan string, 100)
	openLive(t, srv.URL+"/console/clusters/acme/kcl-0000/stream", live)
	var first string
	select {
	case first = <-live:
	case <-time.After(30 * time.Second):
		t.Fatal("no first message of the cluster stream in 30s")
	}

	// The clock: changes of another cluster, each seen on the fleet's
	// stream.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/console/fleet/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rows := make(chan string, 100)
	go func() {
		defer close(rows)
		for m := range sseMessages(resp.Body, "row") {
			rows <- m.HTML
		}
	}()
	other := store.TenantDoc(fsc, "globex").Collection("clusters").Doc(store.DocID("kcl-0001"))
	change := func(i int) {
		t.Helper()
		msg := fmt.Sprintf("tick %d", i)
		if _, err := other.Update(context.Background(), []firestore.Update{{Path: "status.message", Value: msg}}); err != nil {
			t.Fatal(err)
		}
		for html := range rows {
			if strings.Contains(html, msg) {
				return
			}
		}
		t.Fatalf("the fleet's stream ended before %q", msg)
	}
	for i := range 3 { // past what the watcher's first snapshots wake
		change(i)
	}
	before := reads.n.Load()
	for drained := false; !drained; { // what the first snapshots woke
		select {
		case first = <-live:
		default:
			drained = true
		}
	}
	for i := 3; i < 33; i++ {
		change(i)
	}
	if n := reads.n.Load() - before; n != 0 {
		t.Errorf("the cluster stream read Firestore %d times while its cluster did not change, want 0", n)
	}
	select {
	case html := <-live:
		t.Errorf("the cluster stream sent its cluster again while it did not change:\n%s\nfirst:\n%s", html, first)
	default:
	}

	mine := store.TenantDoc(fsc, "acme").Collection("clusters").Doc(store.DocID("kcl-0000"))
	if _, err := mine.Update(context.Background(), []firestore.Update{{Path: "status.message", Value: "changed at last"}}); err != nil {
		t.Fatal(err)
	}
	var html string
	select {
	case html = <-live:
	case <-time.After(30 * time.Second):
		t.Fatal("no message of the cluster stream 30s after its cluster changed")
	}
	if html == first || !strings.Contains(html, "changed at last") {
		t.Errorf("after its cluster changed, the stream sent:\n%s\nwant the new message", html)
	}
}

// TestEventsOffThePublishersPath: a publication returns at once even
// while the console's history is held (the publisher never waits for the
// console), and is kept once the history is free; a redelivered ce-id
// is kept once.
func TestEventsOffThePublishersPath(t *testing.T) {
	fsc := fsemu.ForTest(t, "bc-dev")
	var observe func(topic string, m *pubsubpb.PubsubMessage)
	c := newConsole(t, fsc, 0, func(o *console.Options) {
		o.Published = func(f func(string, *pubsubpb.PubsubMessage)) func() { observe = f; return func() {} }
	})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	msg := func(id string) *pubsubpb.PubsubMessage {
		return &pubsubpb.PubsubMessage{Data: []byte(`{"state":"ready"}`), Attributes: map[string]string{"ce-type": "kubernetes.cluster.ready",
			"ce-id": id, "tenantId": "acme", "clusterId": "kcl-held"}}
	}
	release := c.HoldEvents()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, id := range []string{"held-1", "held-2", "held-1"} {
			observe("projects/bc-dev/topics/kubernetes.cluster.ready", msg(id))
		}
	}()
	wait.Until(t, "the publications returned while the history is held", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	release()
	c.Flush()
	_, body := get(t, c.Handler(), "/console/events?cluster=kcl-held")
	if n := strings.Count(body, "held-1"); n != 1 {
		t.Errorf("the events page shows held-1 %d times, want once", n)
	}
	if !strings.Contains(body, "held-2") {
		t.Errorf("the events page does not show held-2")
	}
}

// BenchmarkEventsObserver is the events view's cost per event with 1,000
// and with 100,000 events seen before: on the publisher's path
// (publish-ns/event) and in all, the event kept and told to the streams
// (ns/event). Both should be flat.
func BenchmarkEventsObserver(b *testing.B) {
	const batch = 2000
	for _, seen := range []int{1000, 100_000} {
		fsc := fsemu.ForTest(b, "bc-dev")
		var observe func(topic string, m *pubsubpb.PubsubMessage)
		c := newConsole(b, fsc, 0, func(o *console.Options) {
			o.Published = func(f func(string, *pubsubpb.PubsubMessage)) func() { observe = f; return func() {} }
		})
		if err := c.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		n := 0
		next := func() *pubsubpb.PubsubMessage {
			n++
			return &pubsubpb.PubsubMessage{Data: []byte(`{"state":"ready","name":"c"}`), Attributes: map[string]string{
				"ce-type": "kubernetes.cluster.ready", "ce-id": fmt.Sprintf("evt-%d", n), "tenantId": "acme",
				"clusterId": fmt.Sprintf("kcl-%d", n%1000), "ce-time": time.Now().UTC().Format(time.RFC3339Nano)}}
		}
		const topic = "projects/bc-dev/topics/kubernetes.cluster.ready"
		for n < seen {
			observe(topic, next())
			if n%10_000 == 0 {
				c.Flush() // within the queue's bound
			}
		}
		c.Flush()
		var publish, all time.Duration
		for range b.N {
			msgs := make([]*pubsubpb.PubsubMessage, batch)
			for i := range msgs {
				msgs[i] = next()
			}
			start := time.Now()
			for _, m := range msgs {
				observe(topic, m)
			}
			publish += time.Since(start)
			c.Flush()
			all += time.Since(start)
		}
		label := fmt.Sprintf("@%dk", seen/1000)
		b.ReportMetric(float64(publish.Nanoseconds())/float64(b.N*batch), "publish-ns/event"+label)
		b.ReportMetric(float64(all.Nanoseconds())/float64(b.N*batch), "ns/event"+label)
		c.Close()
	}
}
