package chain_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	psemu "github.com/better-compute/kubernetes/emulators/pubsub"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/outbox"
)

// timedKicker records when each subject was kicked, and holds the kicks
// of the subjects in slow until their context ends (a Cloud Tasks call
// that never answers).
type timedKicker struct {
	mu     sync.Mutex
	at     map[string]time.Time
	slow   map[string]bool
	tokens map[string]string
}

func (k *timedKicker) Kick(ctx context.Context, kick chain.Kick) error {
	if k.slow[kick.ID] {
		<-ctx.Done()
		return ctx.Err()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.at == nil {
		k.at, k.tokens = map[string]time.Time{}, map[string]string{}
	}
	k.at[kick.ID] = time.Now()
	k.tokens[kick.ID] = kick.Token
	return nil
}

func (k *timedKicker) kickedAt(id string) (time.Time, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	at, ok := k.at[id]
	return at, ok
}

// putDead stores a thing whose chain's run is an hour overdue, the later
// ones of ids the later.
func (e *env) putDead(t *testing.T, ids ...string) {
	t.Helper()
	for i, id := range ids {
		e.put(t, id, chain.State{Token: "old-" + id, NextAt: e.clk.Now().Add(-time.Hour + time.Duration(i)*time.Second)})
	}
}

// A watchdog pass whose drain meets a Pub/Sub that answers each publish
// after 20 s restarts the dead chains at once, and ends long before one
// publish would: each publish has a deadline, and the drain does not hold
// the restarts. The events stay in the outbox for a later pass.
func TestWatchdogSlowPublish(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	ps, err := psemu.NewServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	client, err := pubsub.NewClient(ctx, "chain", option.WithEndpoint(ps.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/chain/topics/things.saved"}); err != nil {
		t.Fatal(err)
	}
	pub := outbox.NewPubSub(client)
	// Stop waits for the publishes the pass left delayed.
	t.Cleanup(pub.Stop)
	relay, err := outbox.NewRelay(e.st, pub, logging.New(t.Output(), slog.LevelInfo))
	if err != nil {
		t.Fatal(err)
	}
	var events []event.Event
	for i := range 3 {
		ev := event.Event{ID: fmt.Sprintf("evt-%d", i), Type: "things.saved", TenantID: "acme", ClusterID: fmt.Sprintf("c%d", i), Time: time.Now().Add(-time.Hour).UTC()}
		if _, err := outboxRef(e.fs, ev).Create(ctx, ev); err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	e.putDead(t, "dead1", "dead2")
	ps.SetLatency("Publish", 20*time.Second)
	k := &timedKicker{}
	w := &chain.Watchdog{Store: e.st, Kinds: []string{"things"}, Kicker: k, Events: relay, Grace: time.Minute, DrainAge: time.Minute, Clock: e.clk}

	// Cloud Scheduler gives a pass 60 s; the test gives it 45.
	pctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	start := time.Now()
	res, err := w.Tick(pctx)
	took := time.Since(start)
	t.Logf("pass = %+v, %v, in %v", res, err, took)
	if took > 12*time.Second {
		t.Errorf("the pass took %v, want well under the publish's 20 s", took)
	}
	for _, id := range []string{"dead1", "dead2"} {
		at, ok := k.kickedAt(id)
		if !ok || at.Sub(start) > 3*time.Second {
			t.Errorf("%s kicked %v after the pass began (kicked %v), want within 3 s", id, at.Sub(start), ok)
		}
	}
	if res.Restarted != 2 || err == nil {
		t.Errorf("pass = %+v, %v; want 2 restarted and the drain's failure reported", res, err)
	}
	// Each event is published or kept, never lost.
	published := map[string]bool{}
	for _, m := range ps.Messages() {
		published[m.Attributes["ce-id"]] = true
	}
	for _, ev := range events {
		if _, err := outboxRef(e.fs, ev).Get(ctx); err != nil && !published[ev.ID] {
			t.Errorf("outbox event %s after the pass: %v, and not published; want it kept for a later drain", ev.ID, err)
		}
	}
}

// One restart whose kick never answers holds neither the other restarts
// nor the pass past the kick's deadline.
func TestWatchdogSlowKick(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.putDead(t, "slow", "dead1", "dead2")
	k := &timedKicker{slow: map[string]bool{"slow": true}}
	w := &chain.Watchdog{Store: e.st, Kinds: []string{"things"}, Kicker: k, Events: &fakeDrainer{}, Grace: time.Minute, Clock: e.clk}
	pctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	start := time.Now()
	res, err := w.Tick(pctx)
	took := time.Since(start)
	t.Logf("pass = %+v, %v, in %v", res, err, took)
	if took > 15*time.Second {
		t.Errorf("the pass took %v, want it to end at the slow kick's deadline", took)
	}
	for _, id := range []string{"dead1", "dead2"} {
		at, ok := k.kickedAt(id)
		if !ok || at.Sub(start) > 3*time.Second {
			t.Errorf("%s kicked %v after the pass began (kicked %v), want within 3 s", id, at.Sub(start), ok)
		}
	}
	if res.Restarted != 2 || err == nil {
		t.Errorf("pass = %+v, %v; want 2 restarted and the slow kick's failure reported", res, err)
	}
}

// A restart whose commit's answer was lost is read back, found stored,
// and kicked in the same pass, not left for a later one.
func TestWatchdogLostRestartAnswer(t *testing.T) {
	ctx := context.Background()
	srv, e := faultyEnv(t)
	e.putDead(t, "dead")
	k := &timedKicker{}
	w := &chain.Watchdog{Store: e.st, Kinds: []string{"things"}, Kicker: k, Events: &fakeDrainer{}, Grace: time.Minute, Clock: e.clk}
	srv.LoseNext("Commit", 1, codes.DeadlineExceeded, "the answer was lost")
	res, err := w.Tick(ctx)
	if srv.Lost("Commit") != 1 {
		t.Fatalf("lost %d commits' answers, want 1", srv.Lost("Commit"))
	}
	k.mu.Lock()
	kicked := k.tokens["dead"]
	k.mu.Unlock()
	stored := e.get(t, chain.Kick{TenantID: "acme", ID: "dead"}).Reconcile.Token
	if err != nil || res.Restarted != 1 || kicked == "" || kicked != stored {
		t.Errorf("pass = %+v, %v; kicked %q, stored %q; want the restart kicked with its stored token", res, err, kicked, stored)
	}
}
