package cloudtasks

import (
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestCreateQueue(t *testing.T) {
	_, c := start(t)
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
	got, err := c.GetQueue(ctx(t), &cloudtaskspb.GetQueueRequest{Name: want.Name})
	if err != nil || !proto.Equal(got, want) {
		t.Errorf("GetQueue(%q) = %v, %v; want %v", want.Name, got, err, want)
	}
}

func TestQueueLifecycle(t *testing.T) {
	clock := newFakeClock()
	srv, c := start(t, WithClock(clock))
	for _, id := range []string{"c", "a", "b"} {
		createQueue(t, c, &cloudtaskspb.Queue{Name: testLocation + "/queues/" + id})
	}
	createQueue(t, c, &cloudtaskspb.Queue{Name: "projects/p1/locations/elsewhere/queues/z"})

	var names []string
	it := c.ListQueues(ctx(t), &cloudtaskspb.ListQueuesRequest{Parent: testLocation, PageSize: 2})
	for {
		q, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatalf("ListQueues: %v", err)
		}
		names = append(names, q.Name)
	}
	wantNames := []string{testLocation + "/queues/a", testLocation + "/queues/b", testLocation + "/queues/c"}
	if len(names) != len(wantNames) || names[0] != wantNames[0] || names[1] != wantNames[1] || names[2] != wantNames[2] {
		t.Errorf("ListQueues = %v, want %v", names, wantNames)
	}
	if _, err := c.ListQueues(ctx(t), &cloudtaskspb.ListQueuesRequest{Parent: testLocation, Filter: "state: PAUSED"}).Next(); code(err) != codes.Unimplemented {
		t.Errorf("ListQueues(filter) = %v, want Unimplemented", err)
	}

	qa := testLocation + "/queues/a"
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
		{"purge", func() (*cloudtaskspb.Queue, error) {
			return c.PurgeQueue(ctx(t), &cloudtaskspb.PurgeQueueRequest{Name: qa})
		}, cloudtaskspb.Queue_RUNNING, 0},
	} {
		got, err := step.call()
		if err != nil || got.State != step.wantState {
			t.Errorf("%s(%q) = %v, %v; want state %v", step.name, qa, got, err, step.wantState)
		}
		if n := len(srv.Tasks(qa)); n != step.wantTasks {
			t.Errorf("after %s: %d tasks, want %d", step.name, n, step.wantTasks)
		}
	}
	if q, _ := c.GetQueue(ctx(t), &cloudtaskspb.GetQueueRequest{Name: qa}); !q.GetPurgeTime().AsTime().Equal(clock.Now()) {
		t.Errorf("purge_time = %v, want %v", q.GetPurgeTime(), clock.Now())
	}
	if _, err := c.CreateTask(ctx(t), &cloudtaskspb.CreateTaskRequest{Parent: qa, Task: task}); code(err) != codes.AlreadyExists {
		t.Errorf("CreateTask(purged name) = %v, want AlreadyExists", err)
	}

	if err := c.DeleteQueue(ctx(t), &cloudtaskspb.DeleteQueueRequest{Name: qa}); err != nil {
		t.Fatalf("DeleteQueue(%q): %v", qa, err)
	}
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"GetQueue", func() error { _, err := c.GetQueue(ctx(t), &cloudtaskspb.GetQueueRequest{Name: qa}); return err }()},
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

func TestUpdateQueue(t *testing.T) {
	_, c := start(t)
	createQueue(t, c, &cloudtaskspb.Queue{
		RateLimits:  &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 10, MaxConcurrentDispatches: 5},
		RetryConfig: &cloudtaskspb.RetryConfig{MaxAttempts: 7},
	})
	mask := func(paths ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: paths} }
	tests := []struct {
		name  string
		queue *cloudtaskspb.Queue
		mask  *fieldmaskpb.FieldMask
		want  codes.Code
		check func(*cloudtaskspb.Queue) bool
	}{
		{"one field", &cloudtaskspb.Queue{Name: testQueue,
			RateLimits: &cloudtaskspb.RateLimits{MaxConcurrentDispatches: 2, MaxDispatchesPerSecond: 99}},
			mask("rate_limits.max_concurrent_dispatches"), codes.OK,
			func(q *cloudtaskspb.Queue) bool {
				return q.RateLimits.MaxConcurrentDispatches == 2 && q.RateLimits.MaxDispatchesPerSecond == 10 && q.RetryConfig.MaxAttempts == 7
			}},
		{"whole message resets unset fields to defaults", &cloudtaskspb.Queue{Name: testQueue,
			RetryConfig: &cloudtaskspb.RetryConfig{MaxDoublings: 2}},
			mask("retry_config"), codes.OK,
			func(q *cloudtaskspb.Queue) bool {
				return q.RetryConfig.MaxDoublings == 2 && q.RetryConfig.MaxAttempts == 100 && q.RateLimits.MaxConcurrentDispatches == 2
			}},
		{"output only path", &cloudtaskspb.Queue{Name: testQueue, State: cloudtaskspb.Queue_PAUSED},
			mask("state"), codes.InvalidArgument, nil},
		{"invalid value", &cloudtaskspb.Queue{Name: testQueue, RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 1000}},
			mask("rate_limits"), codes.InvalidArgument, nil},
		{"creates a missing queue", &cloudtaskspb.Queue{Name: testLocation + "/queues/new",
			RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 3}},
			nil, codes.OK,
			func(q *cloudtaskspb.Queue) bool {
				return q.State == cloudtaskspb.Queue_RUNNING && q.RateLimits.MaxDispatchesPerSecond == 3 && q.RateLimits.MaxBurstSize == 3
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.UpdateQueue(ctx(t), &cloudtaskspb.UpdateQueueRequest{Queue: tt.queue, UpdateMask: tt.mask})
			if code(err) != tt.want {
				t.Fatalf("UpdateQueue(%v, %v) = %v, want %v", tt.queue, tt.mask, err, tt.want)
			}
			if tt.check == nil {
				return
			}
			stored, err := c.GetQueue(ctx(t), &cloudtaskspb.GetQueueRequest{Name: tt.queue.Name})
			if err != nil || !tt.check(got) || !proto.Equal(got, stored) {
				t.Errorf("UpdateQueue = %v, stored %v (%v): not the expected queue", got, stored, err)
			}
		})
	}
}
