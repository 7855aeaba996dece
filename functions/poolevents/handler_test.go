package poolevents

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/store"
)

// The consumer's store is the store.
var _ Store = (*store.Store)(nil)

// anyone admits every caller: the checks of the caller are the edge's,
// tested there.
type anyone struct{}

func (anyone) Verify(context.Context, string) (string, error) { return "pusher", nil }

// pushBody is what a push subscription sends of a pool event's message.
func pushBody(t *testing.T, id, typ string, data []byte) string {
	t.Helper()
	var m MessagePublished
	m.Message.Data, m.Message.MessageID = data, id
	m.Message.Attributes = map[string]string{"ce-type": typ}
	m.Subscription = "projects/p/subscriptions/pool-events"
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The handler applies a pool event delivered as a push subscription's
// JSON and as the messagePublished CloudEvent of one, and drops, with a
// 200, a body that holds no Pub/Sub message.
func TestServeHTTP(t *testing.T) {
	c, fs, _ := newConsumer(t)
	h, err := New(c, anyone{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		header   map[string]string
		body     string
		status   string
		versions []int64 // of the pool's substrates after it
	}{
		{"a push", nil, pushBody(t, "m1", event.PoolUpdated, pool(1, "acc-gcp", "us-central1", 1)), "ok", []int64{1}},
		{"a CloudEvent in binary mode", map[string]string{"Ce-Id": "m2", "Ce-Specversion": "1.0", "Ce-Type": MessagePublishedType,
			"Ce-Source": "//pubsub.googleapis.com/projects/p/topics/pool-events", "Content-Type": "application/json"},
			pushBody(t, "m2", event.PoolUpdated, pool(2, "acc-gcp", "us-central1", 2)), "ok", []int64{2}},
		{"no Pub/Sub message", nil, `{"message": {}}`, "dropped", []int64{2}},
		{"not JSON", nil, `not json`, "dropped", []int64{2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/projects/p/topics/pool-events", strings.NewReader(tt.body))
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			r.Header.Set("Authorization", "Bearer token")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			var got map[string]string
			if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != http.StatusOK || err != nil || got["status"] != tt.status {
				t.Fatalf("ServeHTTP = %d %s, want 200 with status %q", w.Code, w.Body, tt.status)
			}
			subs := substratesOf(t, fs)
			var versions []int64
			for _, s := range subs {
				versions = append(versions, s.Spec.PoolVersion)
			}
			if len(versions) != len(tt.versions) || versions[0] != tt.versions[0] {
				t.Errorf("pool versions of the substrates = %v, want %v", versions, tt.versions)
			}
		})
	}
}
