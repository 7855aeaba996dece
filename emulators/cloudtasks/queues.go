package cloudtasks

import (
	"context"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
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

// GetQueue returns a queue. NOT_FOUND if it does not exist.
func (g *GServer) GetQueue(_ context.Context, req *cloudtaskspb.GetQueueRequest) (*cloudtaskspb.Queue, error) {
	if err := checkQueueName(req.GetName()); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	q, err := g.queueLocked(req.Name)
	if err != nil {
		return nil, err
	}
	return copyQueue(q.pb), nil
}

func (g *GServer) queueLocked(name string) (*queue, error) {
	q, ok := g.queues[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "queue %q", name)
	}
	return q, nil
}

// ListQueues lists the queues of a location in lexicographic order, paged.
// Filters are not supported.
func (g *GServer) ListQueues(_ context.Context, req *cloudtaskspb.ListQueuesRequest) (*cloudtaskspb.ListQueuesResponse, error) {
	if err := checkLocation(req.GetParent()); err != nil {
		return nil, err
	}
	if req.Filter != "" {
		return nil, status.Errorf(codes.Unimplemented, "list filter %q is not supported by the emulator", req.Filter)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var names []string
	for name := range g.queues {
		if strings.HasPrefix(name, req.Parent+"/queues/") {
			names = append(names, name)
		}
	}
	selected, next, err := page(names, req.PageSize, maxQueuePage, req.PageToken)
	if err != nil {
		return nil, err
	}
	resp := &cloudtaskspb.ListQueuesResponse{NextPageToken: next}
	for _, name := range selected {
		resp.Queues = append(resp.Queues, copyQueue(g.queues[name].pb))
	}
	return resp, nil
}

// mutableQueuePaths are the update_mask paths UpdateQueue accepts; the
// fields of a listed message may be named one by one.
var mutableQueuePaths = map[string]bool{
	"rate_limits":                               true,
	"rate_limits.max_dispatches_per_second":     true,
	"rate_limits.max_concurrent_dispatches":     true,
	"retry_config":                              true,
	"retry_config.max_attempts":                 true,
	"retry_config.max_retry_duration":           true,
	"retry_config.min_backoff":                  true,
	"retry_config.max_backoff":                  true,
	"retry_config.max_doublings":                true,
	"stackdriver_logging_config":                true,
	"stackdriver_logging_config.sampling_ratio": true,
	"app_engine_routing_override":               true,
	"http_target":                               true,
}

// UpdateQueue changes the fields named by update_mask (all mutable fields
// when it is empty), or creates the queue if it does not exist. Unset rate
// limits and retry settings return to their defaults. The state cannot be
// changed here: use PauseQueue and ResumeQueue.
func (g *GServer) UpdateQueue(_ context.Context, req *cloudtaskspb.UpdateQueueRequest) (*cloudtaskspb.Queue, error) {
	if req.GetQueue() == nil {
		return nil, status.Errorf(codes.InvalidArgument, "queue is required")
	}
	in := req.Queue
	if err := checkQueueName(in.Name); err != nil {
		return nil, err
	}
	paths := req.GetUpdateMask().GetPaths()
	for _, p := range paths {
		if !mutableQueuePaths[p] {
			return nil, status.Errorf(codes.InvalidArgument, "update_mask path %q: not a mutable queue field", p)
		}
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	q, exists := g.queues[in.Name]
	var updated *cloudtaskspb.Queue
	if exists {
		updated = copyQueue(q.pb)
	} else {
		updated = &cloudtaskspb.Queue{Name: in.Name, State: cloudtaskspb.Queue_RUNNING}
	}
	if len(paths) == 0 {
		updated.RateLimits = proto.Clone(in.RateLimits).(*cloudtaskspb.RateLimits)
		updated.RetryConfig = proto.Clone(in.RetryConfig).(*cloudtaskspb.RetryConfig)
		updated.StackdriverLoggingConfig = proto.Clone(in.StackdriverLoggingConfig).(*cloudtaskspb.StackdriverLoggingConfig)
		updated.AppEngineRoutingOverride = proto.Clone(in.AppEngineRoutingOverride).(*cloudtaskspb.AppEngineRouting)
		updated.HttpTarget = proto.Clone(in.HttpTarget).(*cloudtaskspb.HttpTarget)
	}
	for _, p := range paths {
		copyPath(updated.ProtoReflect(), in.ProtoReflect(), strings.Split(p, "."))
	}
	if updated.RateLimits != nil {
		updated.RateLimits.MaxBurstSize = 0 // output only; recomputed
	}
	fillQueueDefaults(updated)
	if err := checkQueue(updated); err != nil {
		return nil, err
	}
	if !exists {
		if err := g.checkQueueTombstoneLocked(in.Name); err != nil {
			return nil, err
		}
		g.addQueueLocked(updated)
		return copyQueue(updated), nil
	}
	q.pb = updated
	q.tokens = min(q.tokens, float64(updated.RateLimits.MaxBurstSize))
	g.notifyLocked()
	g.wakeDispatcher()
	return copyQueue(updated), nil
}

// copyPath copies the field at path from src to dst, creating the messages
// on the way in dst; an unset field in src clears it in dst.
func copyPath(dst, src protoreflect.Message, path []string) {
	fd := dst.Descriptor().Fields().ByName(protoreflect.Name(path[0]))
	if len(path) == 1 {
		if src.Has(fd) {
			dst.Set(fd, src.Get(fd))
		} else {
			dst.Clear(fd)
		}
		return
	}
	copyPath(dst.Mutable(fd).Message(), src.Get(fd).Message(), path[1:])
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

// PurgeQueue deletes every task of a queue and records the purge time.
func (g *GServer) PurgeQueue(_ context.Context, req *cloudtaskspb.PurgeQueueRequest) (*cloudtaskspb.Queue, error) {
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
	q.pb.PurgeTime = timestamppb.New(g.now())
	g.notifyLocked()
	return copyQueue(q.pb), nil
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
