package tasks_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/tasks"
)

// A kick's task carries the span of the call that kicked (or the link the
// kick already has) to the run; a successor carries its chain's link, and
// none when the chain has dropped it.
func TestTasksCarryTheLink(t *testing.T) {
	q, _, rec := setup(t)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "tenant call")
	defer span.End()
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	call := c["traceparent"]
	other := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

	k := chain.Kick{Kind: "clusters", TenantID: "acme", ID: "kcl_1", Token: "t1"}
	// Each step asks for a task of its own (the same kick twice is one
	// task).
	withLink := k
	withLink.Token, withLink.Link = "t2", other
	steps := []struct {
		name string
		do   func() error
		want string
	}{
		{"kick in a call", func() error { return q.Kick(ctx, k) }, call},
		{"kick with a link", func() error { return q.Kick(ctx, withLink) }, other},
		{"kick outside any span", func() error {
			return q.Kick(context.Background(), chain.Kick{Kind: "clusters", TenantID: "acme", ID: "kcl_2", Token: "t1"})
		}, ""},
		{"successor with the link", func() error { return q.Schedule(ctx, withLink, time.Now(), "task-a") }, other},
		{"successor without", func() error { return q.Schedule(ctx, k, time.Now(), "task-b") }, ""},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		select {
		case <-rec.granted:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: task not dispatched within 10s", s.name)
		}
		rec.mu.Lock()
		got := rec.links[len(rec.links)-1]
		rec.mu.Unlock()
		if got != s.want {
			t.Errorf("%s: %s = %q, want %q", s.name, tasks.LinkHeader, got, s.want)
		}
		if tasks.LinkFrom(http.Header{tasks.LinkHeader: {got}}) != got {
			t.Errorf("%s: LinkFrom refuses %q", s.name, got)
		}
	}
	if got := tasks.LinkFrom(http.Header{tasks.LinkHeader: {"garbage"}}); got != "" {
		t.Errorf("LinkFrom(garbage) = %q, want none", got)
	}
}

// A successor's task carries its kick's hint to the run, through the
// Cloud Tasks emulator, and a kick without one carries none.
func TestTasksCarryTheHint(t *testing.T) {
	q, _, rec := setup(t)
	k := chain.Kick{Kind: "clusters", TenantID: "acme", ID: "kcl_1", Token: "st1", Hint: "p/us-central1/c1/"}
	for i, s := range []struct {
		k    chain.Kick
		want string
	}{{k, k.Hint}, {chain.Kick{Kind: "clusters", TenantID: "acme", ID: "kcl_1", Token: "st1"}, ""}} {
		if err := q.Schedule(context.Background(), s.k, time.Now(), fmt.Sprintf("task-%d", i)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-rec.granted:
		case <-time.After(10 * time.Second):
			t.Fatalf("task %d not dispatched within 10s", i)
		}
		rec.mu.Lock()
		got := rec.hints[len(rec.hints)-1]
		rec.mu.Unlock()
		if got != s.want {
			t.Errorf("task %d: %s = %q, want %q", i, tasks.HintHeader, got, s.want)
		}
	}
}
