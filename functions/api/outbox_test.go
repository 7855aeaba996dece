package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	psemu "github.com/better-compute/kubernetes/emulators/pubsub"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// published returns the Pub/Sub messages whose ce-id is id.
func published(id string) []*psemu.Message {
	var out []*psemu.Message
	for _, m := range h.ps.Messages() {
		if m.Attributes["ce-id"] == id {
			out = append(out, m)
		}
	}
	return out
}

// outboxEvents returns the events waiting in a tenant's outbox.
func outboxEvents(t *testing.T, tenantID string) []event.Event {
	t.Helper()
	docs, err := h.fs.Collection("tenants").Doc(tenantID).Collection(outbox.Collection).Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatalf("read outbox: %v", err)
	}
	var out []event.Event
	for _, d := range docs {
		var e event.Event
		if err := d.DataTo(&e); err != nil {
			t.Fatalf("decode %s: %v", d.Ref.Path, err)
		}
		if d.Ref.ID != e.ID {
			t.Errorf("outbox document %s holds event %s", d.Ref.ID, e.ID)
		}
		out = append(out, e)
	}
	return out
}

// checkMessage checks a published event against API.md §7; seq is its
// place in its cluster's sequence.
func checkMessage(t *testing.T, m *psemu.Message, typ, tenantID, clusterID, nodePoolID string, seq int64, at time.Time, data any) {
	t.Helper()
	want := map[string]string{
		"ce-sequence":    outbox.FormatSequence(seq),
		"ce-specversion": "1.0",
		"ce-id":          m.Attributes["ce-id"],
		"ce-type":        typ,
		"ce-source":      "//compute.better-compute.dev/tenants/" + tenantID,
		"ce-subject":     clusterID,
		"ce-time":        m.Attributes["ce-time"],
		"content-type":   "application/json",
		"tenantId":       tenantID,
		"clusterId":      clusterID,
	}
	if nodePoolID != "" {
		want["nodePoolId"] = nodePoolID
	}
	if !reflect.DeepEqual(m.Attributes, want) {
		t.Errorf("attributes = %v, want %v", m.Attributes, want)
	}
	if got, err := time.Parse(time.RFC3339Nano, m.Attributes["ce-time"]); err != nil || !got.Equal(at) {
		t.Errorf("ce-time = %q, want %s", m.Attributes["ce-time"], at.Format(time.RFC3339Nano))
	}
	if m.OrderingKey != clusterID {
		t.Errorf("ordering key = %q, want the cluster ID %q", m.OrderingKey, clusterID)
	}
	if want := "projects/" + project + "/topics/" + typ; m.Topic != want {
		t.Errorf("topic = %q, want %q", m.Topic, want)
	}
	got := reflect.New(reflect.TypeOf(data)).Interface()
	if err := json.Unmarshal(m.Data, got); err != nil {
		t.Fatalf("data %s: %v", m.Data, err)
	}
	if g := reflect.ValueOf(got).Elem().Interface(); !reflect.DeepEqual(g, data) {
		t.Errorf("data = %+v, want the resource as the API returned it, %+v", g, data)
	}
}

// TestEventsPublished checks that create publishes its event after the
// commit, with API.md §7's attributes, and empties the outbox.
func TestEventsPublished(t *testing.T) {
	tn := newTenant(t)
	c := newCluster(t, tn)
	var p resource.NodePool
	call(t, admin, "kubernetesNodePools/create", createBody(tn, c.ID, "np")).decode(t, &p)
	var clusterMsg, poolMsg *psemu.Message
	wait.Until(t, "both events published", func() bool {
		for _, m := range h.ps.Messages() {
			switch {
			case m.Attributes["tenantId"] != tn.ID:
			case m.Attributes["ce-type"] == event.ClusterCreated:
				clusterMsg = m
			case m.Attributes["ce-type"] == event.NodePoolCreated:
				poolMsg = m
			}
		}
		return clusterMsg != nil && poolMsg != nil
	})
	// The cluster's chain of events: created, then its pool's.
	checkMessage(t, clusterMsg, event.ClusterCreated, tn.ID, c.ID, "", 1, c.CreatedAt, c)
	checkMessage(t, poolMsg, event.NodePoolCreated, tn.ID, c.ID, p.ID, 2, p.CreatedAt, p)
	wait.Until(t, "the outbox emptied", func() bool { return len(outboxEvents(t, tn.ID)) == 0 })
}

// TestOutboxSurvivesPublishFailure checks that an event whose publish
// fails stays in the outbox, and that a drain publishes it once, under the
// same ce-id.
func TestOutboxSurvivesPublishFailure(t *testing.T) {
	tn := newTenant(t)
	c := newCluster(t, tn)
	wait.Until(t, "the cluster's event published", func() bool { return len(outboxEvents(t, tn.ID)) == 0 })

	h.setFailPublish(tn.ID, true)
	t.Cleanup(func() { h.setFailPublish(tn.ID, false) })
	var p resource.NodePool
	call(t, admin, "kubernetesNodePools/create", createBody(tn, c.ID, "np")).decode(t, &p)
	wait.Until(t, "a failed publish", func() bool { return h.publishFailureCount(tn.ID) > 0 })

	events := outboxEvents(t, tn.ID)
	if len(events) != 1 {
		t.Fatalf("outbox = %+v, want the one event whose publish failed", events)
	}
	e := events[0]
	if e.Type != event.NodePoolCreated || e.ClusterID != c.ID || e.NodePoolID != p.ID || e.TenantID != tn.ID || e.Sequence != 2 {
		t.Errorf("outbox event = %+v, want %s of %s", e, event.NodePoolCreated, p.ID)
	}
	if got := published(e.ID); len(got) != 0 {
		t.Fatalf("event %s published %d times while publishing fails", e.ID, len(got))
	}

	// While publishing still fails, a drain leaves the event where it is.
	if _, err := h.relay.Drain(context.Background(), 0, 500); err == nil {
		t.Errorf("Drain while publishing fails = nil error, want the failure")
	}
	if got := published(e.ID); len(got) != 0 {
		t.Fatalf("Drain published %s while publishing fails", e.ID)
	}
	if got := outboxEvents(t, tn.ID); len(got) != 1 {
		t.Fatalf("outbox after a failed drain = %+v, want the event", got)
	}

	h.setFailPublish(tn.ID, false)
	// Once publishing works again, one drain publishes the event, even
	// though the failed publish paused the cluster's ordering key.
	if _, err := h.relay.Drain(context.Background(), 0, 500); err != nil {
		t.Fatalf("Drain after publishing recovered = %v", err)
	}
	if got := outboxEvents(t, tn.ID); len(got) != 0 {
		t.Fatalf("outbox after the drain = %+v, want it empty", got)
	}
	msgs := published(e.ID)
	if len(msgs) != 1 {
		t.Fatalf("event %s published %d times, want once", e.ID, len(msgs))
	}
	// The drain's publish carries the number the transaction gave.
	checkMessage(t, msgs[0], event.NodePoolCreated, tn.ID, c.ID, p.ID, 2, p.CreatedAt, p)

	// Nothing is left to publish again.
	if _, err := h.relay.Drain(context.Background(), 0, 500); err != nil {
		t.Errorf("Drain: %v", err)
	}
	if got := published(e.ID); len(got) != 1 {
		t.Errorf("event %s published %d times after a second drain, want once", e.ID, len(got))
	}
}

// TestStorageFailures checks that a Firestore failure during a mutation
// writes nothing and answers 503 UNAVAILABLE with Retry-After when it is
// worth retrying (within the call's time bound, even while the client
// retries an unavailable backend) or when the commit's outcome cannot be
// learned (an INTERNAL commit may have been stored, and the reading back
// fails with it: OUTCOME_UNKNOWN), 500 INTERNAL revealing nothing for a
// refusal, and that the same call succeeds once Firestore recovers.
func TestStorageFailures(t *testing.T) {
	tn := newTenant(t)
	c := newCluster(t, tn)
	p := listPools(t, tn, c.ID)[0]
	calls := []struct {
		method string
		body   obj
	}{
		{"kubernetesNodePools/create", createBody(tn, c.ID, "np")},
		{"kubernetesNodePools/update", with(poolRef(tn, c.ID, p.ID), "nodeCount", 3)},
		{"kubernetesNodePools/delete", poolRef(tn, c.ID, p.ID)},
		{"kubernetesClusters/create", standardCluster(tn, "second")},
		{"kubernetesClusters/delete", obj{"tenantId": tn.ID, "clusterId": c.ID}},
	}
	for _, code := range []codes.Code{codes.Unavailable, codes.Aborted, codes.Internal, codes.PermissionDenied} {
		status, want := http.StatusServiceUnavailable, "UNAVAILABLE"
		if code == codes.PermissionDenied {
			status, want = http.StatusInternalServerError, "INTERNAL"
		}
		before := clusterDoc(t, tn.ID, c.ID)
		h.setFailCommit(tn.ID, code)
		// The calls run together: an unavailable backend holds each one
		// for the whole call timeout.
		tok := "Bearer " + token(t, admin)
		answers := make([]response, len(calls))
		errs := make([]error, len(calls))
		took := make([]time.Duration, len(calls))
		var wg sync.WaitGroup
		for i, tc := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				answers[i], errs[i] = send(http.MethodPost, tc.method, tok, tc.body, nil)
				took[i] = time.Since(start)
			}()
		}
		wg.Wait()
		for i, tc := range calls {
			t.Run(code.String()+"/"+tc.method, func(t *testing.T) {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				r := answers[i]
				wantError(t, r, status, want)
				if want == "UNAVAILABLE" && r.Header.Get("Retry-After") == "" {
					t.Errorf("answer %v without Retry-After", r)
				}
				if code == codes.Internal && !r.OutcomeUnknown {
					t.Errorf("answer %v, want the detail OUTCOME_UNKNOWN", r)
				}
				if want == "INTERNAL" && r.Message != "internal error" {
					t.Errorf("INTERNAL message = %q, want the generic one", r.Message)
				}
				if took[i] > callTimeout+2*time.Second {
					t.Errorf("answer after %v, want within the call timeout %v", took[i], callTimeout)
				}
			})
		}
		h.setFailCommit(tn.ID, codes.OK)
		after := clusterDoc(t, tn.ID, c.ID)
		if after.Version != before.Version || after.ActivePoolCount != before.ActivePoolCount || after.State != before.State {
			t.Errorf("cluster changed by failed calls (%s): %+v, want %+v", code, after.Cluster, before.Cluster)
		}
		if n := len(tenantDocs(t, tn.ID, "clusters")); n != 1 {
			t.Errorf("clusters = %d after failed calls (%s), want 1", n, code)
		}
	}
	for _, tc := range calls {
		if r := call(t, admin, tc.method, tc.body); r.Status != http.StatusOK {
			t.Errorf("%s after recovery = %v, want 200", tc.method, r)
		}
	}
}
