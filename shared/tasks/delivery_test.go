package tasks_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/tasks"
)

// A create that Cloud Tasks accepted but whose answer was lost fails the
// scheduling (the run's task is retried), and the retry's scheduling,
// meeting the task made, succeeds: one successor, never two, never none.
func TestScheduleAfterLostAnswer(t *testing.T) {
	for _, lost := range []codes.Code{codes.DeadlineExceeded, codes.Unavailable} {
		t.Run(lost.String(), func(t *testing.T) {
			q, srv, _ := setup(t)
			k := chain.Kick{Kind: "clusters", TenantID: "acme", ID: "kcl_1", Token: "t1"}
			later := time.Now().Add(time.Hour)
			srv.LoseNext("CreateTask", 1, lost, "the answer was lost")
			err := q.Schedule(context.Background(), k, later, queue+"/tasks/parent")
			if status.Code(err) != lost {
				t.Fatalf("Schedule() with the answer lost = %v, want %v", err, lost)
			}
			if err := q.Schedule(context.Background(), k, later, queue+"/tasks/parent"); err != nil {
				t.Fatalf("Schedule() again = %v, want nil (the task exists)", err)
			}
			got := srv.Tasks(queue)
			if len(got) != 1 || got[0].GetName() != queue+"/tasks/"+tasks.TaskID(k, queue+"/tasks/parent") {
				t.Errorf("tasks = %v, want the one successor", got)
			}
		})
	}
}

// Every attempt delivered twice reaches the function twice with the same
// payload and task name: telling them apart is the chain's lease's work.
func TestDuplicateDeliveryCarriesTheSamePayload(t *testing.T) {
	q, srv, rec := setup(t)
	srv.SetDuplicateRate(1)
	k := chain.Kick{Kind: "clusters", TenantID: "acme", ID: "kcl_1", Token: "t1"}
	if err := q.Kick(context.Background(), k); err != nil {
		t.Fatalf("Kick() = %v", err)
	}
	for i := range 2 {
		select {
		case <-rec.granted:
		case <-time.After(10 * time.Second):
			t.Fatalf("delivery %d not made within 10s", i+1)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.bodies) != 2 || rec.bodies[0] != rec.bodies[1] || rec.bodies[0].Token != "t1" {
		t.Errorf("payloads = %+v, want the kick's twice", rec.bodies)
	}
}
