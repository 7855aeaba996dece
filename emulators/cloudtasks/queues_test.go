package cloudtasks

import (
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestCreateQueue(t *testing.T) {
	srv, c := start(t)
	tests := []struct {
		name   string
		parent string
		queue  *cloudtaskspb.Queue
		want   codes.Code
	}{
		{"defaults", testLocation, &cloudtaskspb.Queue{Name: testLocation + "/queues/a"}, codes.OK},
		{"duplicate", testLocation, &cloudtaskspb.Queue{Name: testLocation + "/queues/a"}, codes.AlreadyExists},
		{"other location", testLocation, &cloudtaskspb.Queue{Name: "projects/p1/locations/europe-west1/queues/b"}, codes.InvalidArgument},
		{"bad parent", "projects/p1", &cloudtaskspb.Queue{Name: testLocation + "/queues/b"}, codes.InvalidArgument},
		{"bad queue id", testLocation, &cloudtaskspb.Queue{Name: testLocation + "/queues/b_c"}, codes.InvalidArgument},
		{"no queue", testLocation, nil, codes.InvalidArgument},
		{"rate too high", testLocation, &cloudtaskspb.Queue{Name: testLocation + "/queues/b",
			RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 501}}, codes.InvalidArgument},
		{"concurrency too high", testLocation, &cloudtaskspb.Queue{Name: testLocation + "/queues/b",
			RateLimits: &cloudtaskspb.RateLimits{MaxConcurrentDispatches: 5001}}, codes.InvalidArgument},
		{"max attempts below -1", testLocation, &cloudtaskspb.Queue{Name: testLocation + "/queues/b",
			RetryConfig: &cloudtaskspb.RetryConfig{MaxAttempts: -2}}, codes.InvalidArgument},
		{"min above max backoff", testLocation, &cloudtaskspb.Queue{Name: testLocation + "/queues/b",
			RetryConfig: &cloudtaskspb.RetryConfig{MinBackoff: durationpb.New(time.Minute), MaxBackoff: durationpb.New(time.Second)}}, codes.InvalidArgument},
		{"http target", testLocation, &cloudtaskspb.Queue{Name: testLocation + "/queues/b",
			HttpTarget: &cloudtaskspb.HttpTarget{}}, codes.Unimplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.CreateQueue(ctx(t), &cloudtaskspb.CreateQueueRequest{Parent: tt.parent, Queue: tt.queue})
			if code(err) != tt.want {
				t.Errorf("CreateQueue(%v) = %v, want %v", tt.queue, err, tt.want)
			}
		})
	}

	want := &cloudtaskspb.Queue{
		Name:  testLocation + "/queues/a",
		State: cloudtaskspb.Queue_RUNNING,
		RateLimits: &cloudtaskspb.RateLimits{
			MaxDispatchesPerSecond: 500, MaxBurstSize: 100, MaxConcurrentDispatches: 1000,
		},
		RetryConfig: &cloudtaskspb.RetryConfig{
			MaxAttempts: 100, MaxRetryDuration: durationpb.New(0), MinBackoff: durationpb.New(100 * time.Millisecond),
			MaxBackoff: durationpb.New(time.Hour), MaxDoublings: 16,
		},
	}
	if got := storedQueue(srv, want.Name); !proto.Equal(got, want) {
		t.Errorf("queue %q = %v, want %v", want.Name, got, want)
	}
}

func TestQueueLifecycle(t *testing.T) {
	clock := newFakeClock()
	srv, c := start(t, WithClock(clock))
	qa := testLocation + "/queues/a"
	createQueue(t, c, &cloudtaskspb.Queue{Name: qa})
	task := httpTask(qa+"/tasks/t", "http://example.test/x")
	task.ScheduleTime = timestamppb.New(clock.Now().Add(time.Hour))
	if _, err := c.CreateTask(ctx(t), &cloudtaskspb.CreateTaskRequest{Parent: qa, Task: task}); err != nil {
		t.Fatalf("CreateTask: %v", err)
	}

	for _, step := range []struct {
		name      string
		call      func() (*cloudtaskspb.Queue, error)
		wantState cloudtaskspb.Queue_State
		wantTasks int
	}{
		{"pause", func() (*cloudtaskspb.Queue, error) {
			return c.PauseQueue(ctx(t), &cloudtaskspb.PauseQueueRequest{Name: qa})
		}, cloudtaskspb.Queue_PAUSED, 1},
		{"resume", func() (*cloudtaskspb.Queue, error) {
			return c.ResumeQueue(ctx(t), &cloudtaskspb.ResumeQueueRequest{Name: qa})
		}, cloudtaskspb.Queue_RUNNING, 1},
	} {
		got, err := step.call()
		if err != nil || got.State != step.wantState {
			t.Errorf("%s(%q) = %v, %v; want state %v", step.name, qa, got, err, step.wantState)
		}
		if n := len(srv.Tasks(qa)); n != step.wantTasks {
			t.Errorf("after %s: %d tasks, want %d", step.name, n, step.wantTasks)
		}
	}
	if err := c.DeleteQueue(ctx(t), &cloudtaskspb.DeleteQueueRequest{Name: qa}); err != nil {
		t.Fatalf("DeleteQueue(%q): %v", qa, err)
	}
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"DeleteQueue", c.DeleteQueue(ctx(t), &cloudtaskspb.DeleteQueueRequest{Name: qa})},
		{"PauseQueue", func() error { _, err := c.PauseQueue(ctx(t), &cloudtaskspb.PauseQueueRequest{Name: qa}); return err }()},
		{"ListTasks", func() error {
			_, err := c.ListTasks(ctx(t), &cloudtaskspb.ListTasksRequest{Parent: qa}).Next()
			return err
		}()},
	} {
		if code(tt.err) != codes.NotFound {
			t.Errorf("%s(deleted queue) = %v, want NotFound", tt.name, tt.err)
		}
	}
}

// TestUnservedRPCsAnswerUnimplemented: an RPC nobody calls is not served
// (emulators/README.md), and says so.
func TestUnservedRPCsAnswerUnimplemented(t *testing.T) {
	_, c := start(t)
	createQueue(t, c, nil)
	task := testQueue + "/tasks/t"
	for name, call := range map[string]func() error{
		"GetQueue": func() error {
			_, err := c.GetQueue(ctx(t), &cloudtaskspb.GetQueueRequest{Name: testQueue})
			return err
		},
		"ListQueues": func() error {
			_, err := c.ListQueues(ctx(t), &cloudtaskspb.ListQueuesRequest{Parent: testLocation}).Next()
			return err
		},
		"UpdateQueue": func() error {
			_, err := c.UpdateQueue(ctx(t), &cloudtaskspb.UpdateQueueRequest{Queue: &cloudtaskspb.Queue{Name: testQueue}})
			return err
		},
		"PurgeQueue": func() error {
			_, err := c.PurgeQueue(ctx(t), &cloudtaskspb.PurgeQueueRequest{Name: testQueue})
			return err
		},
		"DeleteTask": func() error { return c.DeleteTask(ctx(t), &cloudtaskspb.DeleteTaskRequest{Name: task}) },
		"RunTask": func() error {
			_, err := c.RunTask(ctx(t), &cloudtaskspb.RunTaskRequest{Name: task})
			return err
		},
	} {
		if err := call(); code(err) != codes.Unimplemented {
			t.Errorf("%s = %v, want Unimplemented", name, err)
		}
	}
}
