package cloudtasks

import (
	"context"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// CreateQueue creates a RUNNING queue with the service's defaults for unset
// rate limits and retry settings. ALREADY_EXISTS if the name is taken.
func (g *GServer) CreateQueue(_ context.Context, req *cloudtaskspb.CreateQueueRequest) (*cloudtaskspb.Queue, error) {
	if err := checkLocation(req.GetParent()); err != nil {
		return nil, err
	}
	if req.GetQueue() == nil {
		return nil, status.Errorf(codes.InvalidArgument, "queue is required")
	}
	qp := copyQueue(req.Queue)
	if err := checkQueueName(qp.Name); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(qp.Name, req.Parent+"/queues/") {
		return nil, status.Errorf(codes.InvalidArgument, "queue %q is not in location %q", qp.Name, req.Parent)
	}
	qp.State = cloudtaskspb.Queue_RUNNING
	qp.PurgeTime = nil
	fillQueueDefaults(qp)
	if err := checkQueue(qp); err != nil {
		return nil, err
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.queues[qp.Name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "queue %q already exists", qp.Name)
	}
	if err := g.checkQueueTombstoneLocked(qp.Name); err != nil {
		return nil, err
	}
	g.addQueueLocked(qp)
	return copyQueue(qp), nil
}

func (g *GServer) addQueueLocked(qp *cloudtaskspb.Queue) *queue {
	q := &queue{
		pb:       qp,
		tasks:    map[string]*task{},
		tokens:   float64(qp.RateLimits.MaxBurstSize),
		refilled: g.now(),
	}
	g.queues[qp.Name] = q
	g.notifyLocked()
	return q
}

func (g *GServer) queueLocked(name string) (*queue, error) {
	q, ok := g.queues[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "queue %q", name)
	}
	return q, nil
}

// DeleteQueue deletes a queue and its tasks, whatever their state. Attempts
// in flight finish but their outcome is discarded.
func (g *GServer) DeleteQueue(_ context.Context, req *cloudtaskspb.DeleteQueueRequest) (*emptypb.Empty, error) {
	if err := checkQueueName(req.GetName()); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	q, err := g.queueLocked(req.Name)
	if err != nil {
		return nil, err
	}
	for _, t := range q.tasks {
		g.removeTaskLocked(t)
	}
	delete(g.queues, req.Name)
	g.queueTombstones[req.Name] = g.now()
	g.notifyLocked()
	return &emptypb.Empty{}, nil
}

// queueTombstonedLocked says whether a queue of that name was deleted
// within the queue tombstone period before now.
func (g *GServer) queueTombstonedLocked(name string, now time.Time) bool {
	at, ok := g.queueTombstones[name]
	if ok && now.Sub(at) >= g.cfg.queueTombstone {
		delete(g.queueTombstones, name)
		return false
	}
	return ok
}

// checkQueueTombstoneLocked refuses to create a queue whose name a
// deleted queue still holds, as Cloud Tasks does for up to 3 days.
func (g *GServer) checkQueueTombstoneLocked(name string) error {
	if g.queueTombstonedLocked(name, g.now()) {
		return status.Error(codes.FailedPrecondition, "The queue cannot be created because a queue with this name existed too recently.")
	}
	return nil
}

// PauseQueue stops dispatch from a queue; tasks can still be added and
// attempts in flight finish.
func (g *GServer) PauseQueue(_ context.Context, req *cloudtaskspb.PauseQueueRequest) (*cloudtaskspb.Queue, error) {
	return g.setState(req.GetName(), cloudtaskspb.Queue_PAUSED)
}

// ResumeQueue restarts dispatch from a paused queue.
func (g *GServer) ResumeQueue(_ context.Context, req *cloudtaskspb.ResumeQueueRequest) (*cloudtaskspb.Queue, error) {
	return g.setState(req.GetName(), cloudtaskspb.Queue_RUNNING)
}

func (g *GServer) setState(name string, state cloudtaskspb.Queue_State) (*cloudtaskspb.Queue, error) {
	if err := checkQueueName(name); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	q, err := g.queueLocked(name)
	if err != nil {
		return nil, err
	}
	q.pb.State = state
	g.notifyLocked()
	g.wakeDispatcher()
	return copyQueue(q.pb), nil
}
