package cloudtasks

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	ctapi "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func benchServer(b *testing.B) (*Server, *ctapi.Client) {
	srv, err := NewServer(WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatalf("NewServer: %v", err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	c, err := ctapi.NewClient(context.Background(), srv.ClientOptions()...)
	if err != nil {
		b.Fatalf("NewClient: %v", err)
	}
	b.Cleanup(func() { _ = c.Close() })
	if _, err := c.CreateQueue(context.Background(), &cloudtaskspb.CreateQueueRequest{
		Parent: testLocation, Queue: &cloudtaskspb.Queue{Name: testQueue},
	}); err != nil {
		b.Fatalf("CreateQueue: %v", err)
	}
	return srv, c
}

// BenchmarkCreateTask measures a CreateTask round trip through the official
// client for a task scheduled later, so no dispatch competes.
func BenchmarkCreateTask(b *testing.B) {
	_, c := benchServer(b)
	at := timestamppb.New(time.Now().Add(time.Hour))
	for b.Loop() {
		task := httpTask("", "http://example.test/x")
		task.ScheduleTime = at
		if _, err := c.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: task}); err != nil {
			b.Fatalf("CreateTask: %v", err)
		}
	}
}

// BenchmarkDispatch measures creating a due task and waiting until it has
// been delivered and completed.
func BenchmarkDispatch(b *testing.B) {
	srv, c := benchServer(b)
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	b.Cleanup(target.Close)
	ctx := context.Background()
	for b.Loop() {
		if _, err := c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: httpTask("", target.URL)}); err != nil {
			b.Fatalf("CreateTask: %v", err)
		}
		if err := srv.WaitIdle(ctx); err != nil {
			b.Fatalf("WaitIdle: %v", err)
		}
	}
}
