package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// TestEventsTailOrders publishes a cluster's events shuffled, some twice
// and one missing, as instances publishing side by side may: bc events
// tail prints each once, in ce-sequence order, and notes the gap.
func TestEventsTailOrders(t *testing.T) {
	t.Parallel()
	u := loggedIn(t)
	s := devStack(t)
	clusterID := resource.NewClusterID()
	const last = 12 // 11 never comes
	ctx, cancel := context.WithTimeout(context.Background(), waitTime)
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"events", "tail", "--cluster", clusterID, "-o", "json", "--order-wait", "5s", "--limit", fmt.Sprint(last - 1)},
			u.lookup, &out, &errOut)
	}()
	wait.For(t, "bc events tail listening", func() (bool, string) {
		return strings.Contains(errOut.String(), "Listening for"), errOut.String()
	})

	var nums []int64
	for n := int64(1); n <= last; n++ {
		if n != 11 {
			nums = append(nums, n)
		}
	}
	nums = append(nums, 3, 7, 12) // redeliveries
	r := rand.New(rand.NewPCG(7, 7))
	r.Shuffle(len(nums), func(i, j int) { nums[i], nums[j] = nums[j], nums[i] })
	for _, n := range nums {
		typ := event.NodePoolReady
		if n%2 == 0 {
			typ = event.ClusterUpdated
		}
		attrs := map[string]string{
			"ce-specversion": "1.0", "ce-id": fmt.Sprintf("evt_order_%d", n), "ce-type": typ,
			"ce-source": outbox.Source("acme"), "ce-subject": clusterID, "ce-time": time.Now().UTC().Format(time.RFC3339Nano),
			"ce-sequence": outbox.FormatSequence(n), "content-type": "application/json", "tenantId": "acme", "clusterId": clusterID,
		}
		if typ == event.NodePoolReady {
			attrs["nodePoolId"] = "knp_order"
		}
		if _, err := s.PubSubClient.Publisher(typ).Publish(ctx, &pubsub.Message{Data: []byte(`{}`), Attributes: attrs}).Get(ctx); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}

	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("bc events tail ended with %d\n%s", code, errOut.String())
		}
	case <-time.After(waitTime):
		t.Fatalf("bc events tail did not stop after %d events; printed:\n%s", last-1, out.String())
	}
	var got []string
	for _, l := range nonEmpty(out.String()) {
		var e printedEvent
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q is not an event: %v", l, err)
		}
		got = append(got, e.Attributes["ce-sequence"])
	}
	var want []string
	for n := int64(1); n <= last; n++ {
		if n != 11 {
			want = append(want, outbox.FormatSequence(n))
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("printed ce-sequence\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if note := "cluster/" + clusterID + ": event 11 did not come"; !strings.Contains(errOut.String(), note) {
		t.Errorf("stderr has no note %q:\n%s", note, errOut.String())
	}
}
