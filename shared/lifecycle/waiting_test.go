package lifecycle

import (
	"reflect"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// TestRunFailed: transient failures are recorded from the first, and said
// in the messages of the cluster and its changing pools only once they
// have lasted more than RetryShownAfter; states never change, and an
// error keeps its message.
func TestRunFailed(t *testing.T) {
	since := t0.Add(-RetryShownAfter - time.Second)
	shown := "retrying since " + since.Format(time.RFC3339) + ": GKE is unavailable"
	tests := []struct {
		name        string
		prev        *model.Retry
		cluster     resource.State
		wantSince   time.Time
		wantCluster string
		wantPools   []string // ready, updating, pending, error, deleting
	}{
		{"first failure: recorded, not shown", nil, updating, t0, "", []string{"", "", "", "e", ""}},
		{"a minute exactly: not shown", &model.Retry{Since: t0.Add(-RetryShownAfter), Reason: "x"}, updating, t0.Add(-RetryShownAfter), "", []string{"", "", "", "e", ""}},
		{"over a minute: shown", &model.Retry{Since: since, Reason: "old reason"}, updating, since, shown, []string{"", shown, shown, "e", shown}},
		{"a cluster in error keeps its error", &model.Retry{Since: since}, failed, since, "e", []string{"", shown, shown, "e", shown}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cluster(tt.cluster, 1, 1)
			c.Status.Message = ""
			if tt.cluster == failed {
				c.Status.Message = "e"
			}
			pools := []model.NodePool{pool("r", ready, 1, 1), pool("u", updating, 1, 1), pool("p", pending, 1, 1), pool("f", failed, 1, 1), pool("d", deleting, 1, 1)}
			for i := range pools {
				pools[i].Status.Message = ""
			}
			pools[3].Status.Message = "e"
			pools[4].Spec.Deleting = true
			RunFailed(&c, pools, tt.prev, "GKE is unavailable", t0)
			if r := c.Status.Retrying; r == nil || !r.Since.Equal(tt.wantSince) || r.Reason != "GKE is unavailable" {
				t.Errorf("Retrying = %+v, want since %v for GKE is unavailable", r, tt.wantSince)
			}
			if st, msg := model.ClusterState(&c); st != tt.cluster || msg != tt.wantCluster {
				t.Errorf("cluster = %s %q, want %s %q", st, msg, tt.cluster, tt.wantCluster)
			}
			var got []string
			for i, want := range []resource.State{ready, updating, pending, failed, deleting} {
				st, msg := model.NodePoolState(&pools[i])
				if st != want {
					t.Errorf("pool %s state = %s, want %s", pools[i].Spec.Name, st, want)
				}
				got = append(got, msg)
			}
			if !reflect.DeepEqual(got, tt.wantPools) {
				t.Errorf("pool messages = %q, want %q", got, tt.wantPools)
			}
		})
	}
}

// TestWaitingWritesOnChange: a message that stays the same leaves the
// status as it was, so that a wait is written when it starts and ends.
func TestWaitingWritesOnChange(t *testing.T) {
	p := pool("a", updating, 1, 1)
	NodePoolWaiting(&p, "waiting", t0)
	NodePoolWaiting(&p, "waiting", t0.Add(time.Minute))
	if p.Status.Message != "waiting" || !p.Status.UpdatedAt.Equal(t0) {
		t.Errorf("status = %q at %v, want waiting at %v", p.Status.Message, p.Status.UpdatedAt, t0)
	}
	c := cluster(updating, 1, 1)
	ClusterWaiting(&c, "waiting", t0)
	ClusterWaiting(&c, "waiting", t0.Add(time.Minute))
	if c.Status.Message != "waiting" || !c.Status.UpdatedAt.Equal(t0) {
		t.Errorf("cluster status = %q at %v, want waiting at %v", c.Status.Message, c.Status.UpdatedAt, t0)
	}
}
