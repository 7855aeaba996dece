package cloudtasks

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

// BenchmarkDispatchManyPending measures dispatch while queues also hold
// pending tasks scheduled an hour ahead, as in a fleet of reconcile chains
// that each wait for their next run: chains each create a due task and wait
// for its delivery before creating the next. With one chain every creation
// and completion has a dispatcher pass to itself, as at the modest rates of
// a fleet simulation; with 32 the passes are shared and the machine is
// saturated. The tasks go to 32 queues in turn so that
// max_dispatches_per_second (at most 500 per queue) does not set the pace.
// cpu-ns/dispatch is the whole process's CPU time (emulator, client and
// target), which is what saturates a small machine.
func BenchmarkDispatchManyPending(b *testing.B) {
	for _, pending := range []int{0, 10000} {
		for _, chains := range []int{1, 32} {
			b.Run(fmt.Sprintf("pending=%d/chains=%d", pending, chains), func(b *testing.B) {
				benchDispatchManyPending(b, pending, chains)
			})
		}
	}
}

func benchDispatchManyPending(b *testing.B, pending, chains int) {
	const queues = 32
	srv, c := benchServer(b)
	g := srv.GServer
	ctx := context.Background()
	var names []string
	for i := range queues {
		q := fmt.Sprintf("%s/queues/m%d", testLocation, i)
		names = append(names, q)
		// Paused while it fills, so that setup does not pay for
		// dispatcher passes; the requests go to GServer directly to keep
		// setup short.
		if _, err := g.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{Parent: testLocation, Queue: &cloudtaskspb.Queue{Name: q}}); err != nil {
			b.Fatalf("CreateQueue: %v", err)
		}
		if _, err := g.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: q}); err != nil {
			b.Fatalf("PauseQueue: %v", err)
		}
	}
	at := timestamppb.New(time.Now().Add(time.Hour))
	for i := range pending {
		task := httpTask("", "http://example.test/x")
		task.ScheduleTime = at
		if _, err := g.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: names[i%queues], Task: task}); err != nil {
			b.Fatalf("CreateTask: %v", err)
		}
	}
	for _, q := range names {
		if _, err := g.ResumeQueue(ctx, &cloudtaskspb.ResumeQueueRequest{Name: q}); err != nil {
			b.Fatalf("ResumeQueue: %v", err)
		}
	}

	delivered := make([]chan struct{}, chains)
	for i := range delivered {
		delivered[i] = make(chan struct{}, 1)
	}
	target := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		delivered[i] <- struct{}{}
	}))
	b.Cleanup(target.Close)

	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu := cpuTime()
	for i := range chains {
		wg.Go(func() {
			url := fmt.Sprintf("%s/%d", target.URL, i)
			for n := left.Add(-1); n >= 0; n = left.Add(-1) {
				req := &cloudtaskspb.CreateTaskRequest{Parent: names[n%queues], Task: httpTask("", url)}
				if _, err := c.CreateTask(ctx, req); err != nil {
					b.Errorf("CreateTask: %v", err)
					return
				}
				<-delivered[i]
			}
		})
	}
	wg.Wait()
	cpu = cpuTime() - cpu
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "dispatches/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/dispatch")
}

// cpuTime is the user and system CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
