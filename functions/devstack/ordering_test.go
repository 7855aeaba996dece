package devstack_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/resource"
)

// orderedReceiver is a consumer of one event topic through a subscription
// with message ordering enabled, streaming (Receive, default settings), as
// a user of the devstack's Pub/Sub would write it after the README's
// example: it keeps each ce-id once and acknowledges every message.
type orderedReceiver struct {
	mu sync.Mutex
	// firsts lists, by ordering key, the message IDs in the order of their
	// first arrival.
	firsts map[string][]string
	seen   map[string]bool // by ce-id
	byPool map[string]bool // nodePoolId of every event received
	keyErr []string        // messages whose ordering key is not their cluster
	change chan struct{}   // signalled (without blocking) on every new event
	// maxLag is the longest an event took from its publication to its
	// first arrival, and lagged names it.
	maxLag time.Duration
	lagged string
}

func receiveOrdered(t *testing.T, e *env, typ string) *orderedReceiver {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	name := "projects/bc-dev/subscriptions/ordered-" + typ
	_, err := e.PubSubClient.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: name, Topic: "projects/bc-dev/topics/" + typ, EnableMessageOrdering: true,
	})
	if err != nil {
		cancel()
		t.Fatalf("create subscription %s: %v", name, err)
	}
	r := &orderedReceiver{firsts: map[string][]string{}, seen: map[string]bool{}, byPool: map[string]bool{}, change: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := e.PubSubClient.Subscriber(name).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
			r.mu.Lock()
			id := m.Attributes["ce-id"]
			if !r.seen[id] {
				r.seen[id] = true
				if lag := time.Since(m.PublishTime); lag > r.maxLag {
					r.maxLag, r.lagged = lag, fmt.Sprintf("%s (%s of cluster %s)", m.ID, id, m.OrderingKey)
				}
				r.firsts[m.OrderingKey] = append(r.firsts[m.OrderingKey], m.ID)
				r.byPool[m.Attributes["nodePoolId"]] = true
				if m.OrderingKey != m.Attributes["clusterId"] {
					r.keyErr = append(r.keyErr, fmt.Sprintf("%s: ordering key %q, cluster %q", m.ID, m.OrderingKey, m.Attributes["clusterId"]))
				}
			}
			r.mu.Unlock()
			m.Ack()
			select {
			case r.change <- struct{}{}:
			default:
			}
		})
		if err != nil && ctx.Err() == nil {
			t.Errorf("Receive(%s): %v", name, err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// missing returns the pools of want that no event has named yet.
func (r *orderedReceiver) missing(want []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, id := range want {
		if !r.byPool[id] {
			out = append(out, id)
		}
	}
	return out
}

// maxOrderedLag bounds how long an event may take from its publication to
// the ordered consumer. With Google's pstest, whose streaming pull handed a
// stream one message every 10 ms, this test's events took up to 3.6 s
// (4.9 s with -race), and more the more events there are; served by
// emulators/pubsub, under 1 s.
const maxOrderedLag = 3 * time.Second

// TestOrderedConsumer consumes kubernetes.nodepool.created through a
// subscription with message ordering enabled while many clusters and node
// pools are created at once: every event arrives, each within
// maxOrderedLag of its publication, and the events of each cluster arrive
// in the order they were published.
func TestOrderedConsumer(t *testing.T) {
	t.Parallel()
	e := startEnv(t, fastConfig())
	r := receiveOrdered(t, e, event.NodePoolCreated)

	const clusters, poolsPerCluster = 30, 10
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		poolIDs []string
		errList []string
	)
	for i := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail := func(err error) {
				mu.Lock()
				errList = append(errList, err.Error())
				mu.Unlock()
			}
			name := fmt.Sprintf("ordered-%d-%d", i, clusterSeq.Add(1))
			var cl resource.Cluster
			body := map[string]any{"tenantId": "acme", "poolId": "pool-dev", "name": name, "mode": "standard", "region": "us-central1",
				"nodePools": []any{poolSpec("a", 1)}}
			if err := callRetrying(e.api, "kubernetesClusters/create", body, &cl); err != nil {
				fail(fmt.Errorf("create cluster %s: %w", name, err))
				return
			}
			// The cluster's own pools publish no kubernetes.nodepool.created
			// (its kubernetes.cluster.created announces them): create the
			// others three at a time, racing for the cluster.
			var pg sync.WaitGroup
			for w := range 3 {
				pg.Add(1)
				go func() {
					defer pg.Done()
					for j := 1 + w; j < poolsPerCluster; j += 3 {
						body := map[string]any{"tenantId": "acme", "clusterId": cl.ID, "name": fmt.Sprintf("p%d", j), "machineType": "e2-standard-4", "nodeCount": 1}
						var p resource.NodePool
						if err := callRetrying(e.api, "kubernetesNodePools/create", body, &p); err != nil {
							fail(fmt.Errorf("create node pool p%d of %s: %w", j, cl.ID, err))
							return
						}
						mu.Lock()
						poolIDs = append(poolIDs, p.ID)
						mu.Unlock()
					}
				}()
			}
			pg.Wait()
		}()
	}
	wg.Wait()
	if len(errList) > 0 {
		t.Fatalf("creating clusters and node pools: %d failed, e.g. %s", len(errList), errList[0])
	}
	if len(poolIDs) != clusters*(poolsPerCluster-1) {
		t.Fatalf("node pools created = %d, want %d", len(poolIDs), clusters*(poolsPerCluster-1))
	}

	deadline := time.NewTimer(waitTime)
	defer deadline.Stop()
	for missing := r.missing(poolIDs); len(missing) > 0; missing = r.missing(poolIDs) {
		select {
		case <-r.change:
		case <-deadline.C:
			t.Fatalf("ordered consumer waited %v: %d of %d kubernetes.nodepool.created missing (e.g. %s)",
				waitTime, len(missing), len(poolIDs), missing[0])
		}
	}

	// The order of publication of each cluster's events: the emulator
	// numbers messages as it accepts them.
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Logf("longest from publication to the consumer: %v, %s", r.maxLag, r.lagged)
	if r.maxLag > maxOrderedLag {
		t.Errorf("event %s reached the ordered consumer %v after its publication, want at most %v", r.lagged, r.maxLag, maxOrderedLag)
	}
	for _, msg := range r.keyErr {
		t.Errorf("event %s", msg)
	}
	for key, ids := range r.firsts {
		for i := 1; i < len(ids); i++ {
			if msgNumber(t, ids[i-1]) > msgNumber(t, ids[i]) {
				t.Errorf("events of cluster %s arrived in the order %v, want the order of publication", key, ids)
				break
			}
		}
	}
}

// msgNumber is a message ID as a number: the emulator's IDs are decimal,
// as Pub/Sub's are, and it numbers messages in the order it takes them.
func msgNumber(t *testing.T, id string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		t.Fatalf("message ID %q is not a decimal number", id)
	}
	return n
}

// callRetrying calls method, again while the API answers UNAVAILABLE
// (contention on the cluster), which API.md §2 says is safe to retry.
func callRetrying(c *client, method string, body, out any) error {
	var err error
	for range 20 {
		err = c.call(method, body, out)
		var ae *apiError
		if !errors.As(err, &ae) || ae.Code != "UNAVAILABLE" {
			return err
		}
	}
	return err
}
