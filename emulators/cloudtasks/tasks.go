package cloudtasks

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// CreateTask adds an HTTP task to an existing queue. An empty name gets a
// generated ID. A name that exists, or existed within the tombstone period,
// returns ALREADY_EXISTS. An unset or past schedule_time becomes now.
func (g *GServer) CreateTask(_ context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
	if err := checkQueueName(req.GetParent()); err != nil {
		return nil, err
	}
	if req.GetTask() == nil {
		return nil, status.Errorf(codes.InvalidArgument, "task is required")
	}
	tp := proto.Clone(req.Task).(*cloudtaskspb.Task)
	if err := g.checkNewTask(req.Parent, tp); err != nil {
		return nil, err
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	q, err := g.queueLocked(req.Parent)
	if err != nil {
		if g.queueTombstonedLocked(req.Parent, now) {
			return nil, status.Error(codes.FailedPrecondition, "The queue no longer exists, though a queue with this name existed recently.")
		}
		return nil, err
	}
	if tp.Name == "" {
		tp.Name = req.Parent + "/tasks/" + strconv.FormatUint(rand.Uint64(), 10)
	}
	if _, ok := g.tasks[tp.Name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "task %q already exists", tp.Name)
	}
	g.sweepTombstonesLocked(now)
	if at, ok := g.tombstones[tp.Name]; ok && now.Sub(at) < g.cfg.tombstone {
		return nil, status.Error(codes.AlreadyExists, "The task cannot be created because a task with this name existed too recently. For more information about task de-duplication see https://cloud.google.com/tasks/docs/reference/rest/v2/projects.locations.queues.tasks/create#body.request_body.FIELDS.task.")
	}
	if tp.ScheduleTime == nil || tp.ScheduleTime.AsTime().Before(now) {
		tp.ScheduleTime = timestamppb.New(now)
	}
	if tp.ScheduleTime.AsTime().Sub(now) > maxScheduleAhead {
		return nil, status.Errorf(codes.InvalidArgument, "schedule_time %v: more than %v ahead", tp.ScheduleTime.AsTime(), maxScheduleAhead)
	}
	tp.CreateTime = timestamppb.New(now.Truncate(time.Second))
	t := &task{pb: tp, due: tp.ScheduleTime.AsTime(), index: -1, queue: q}
	q.wait(t)
	q.tasks[tp.Name] = t
	g.tasks[tp.Name] = t
	g.notifyLocked()
	g.wakeDispatcher()
	return viewTask(tp, req.ResponseView), nil
}

// checkNewTask validates a task about to be created in queue and clears
// its output-only fields.
func (g *GServer) checkNewTask(queueName string, tp *cloudtaskspb.Task) error {
	if tp.Name != "" {
		qn, _, err := splitTaskName(tp.Name)
		if err != nil {
			return err
		}
		if qn != queueName {
			return status.Errorf(codes.InvalidArgument, "task %q is not in queue %q", tp.Name, queueName)
		}
	}
	hr := tp.GetHttpRequest()
	if hr == nil {
		if tp.GetAppEngineHttpRequest() != nil {
			return status.Errorf(codes.Unimplemented, "App Engine tasks are not supported by the emulator")
		}
		return status.Errorf(codes.InvalidArgument, "task.http_request is required")
	}
	if err := checkHTTPRequest(hr); err != nil {
		return err
	}
	if d := tp.DispatchDeadline; d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < minDispatchTimeout || d.AsDuration() > maxDispatchTimeout {
			return status.Errorf(codes.InvalidArgument, "dispatch_deadline %v: must be between 15 seconds and 30 minutes", d.AsDuration())
		}
	}
	if tp.RetryConfig != nil {
		fillRetryDefaults(tp.RetryConfig)
		if err := checkRetryConfig(tp.RetryConfig); err != nil {
			return err
		}
	}
	if err := tp.ScheduleTime.CheckValid(); tp.ScheduleTime != nil && err != nil {
		return status.Errorf(codes.InvalidArgument, "schedule_time: %v", err)
	}
	if size := proto.Size(tp); size > maxTaskSize {
		return status.Errorf(codes.InvalidArgument, "task size %d bytes: above the %d byte limit", size, maxTaskSize)
	}
	tp.CreateTime, tp.FirstAttempt, tp.LastAttempt = nil, nil, nil
	tp.DispatchCount, tp.ResponseCount, tp.View = 0, 0, cloudtaskspb.Task_VIEW_UNSPECIFIED
	return nil
}

// sweepTombstonesLocked forgets expired tombstones, at most once a minute
// so that CreateTask stays cheap.
func (g *GServer) sweepTombstonesLocked(now time.Time) {
	if now.Sub(g.lastSweep) < time.Minute {
		return
	}
	g.lastSweep = now
	for name, at := range g.tombstones {
		if now.Sub(at) >= g.cfg.tombstone {
			delete(g.tombstones, name)
		}
	}
}

// removeTaskLocked deletes a task and reserves its name for the tombstone
// period. An attempt still in flight sees the task gone and discards its
// outcome.
func (g *GServer) removeTaskLocked(t *task) {
	t.queue.unwait(t)
	delete(t.queue.tasks, t.pb.Name)
	delete(g.tasks, t.pb.Name)
	g.tombstones[t.pb.Name] = g.now()
}

// GetTask returns a task. NOT_FOUND if it does not exist, including after
// it ran successfully or was dropped.
func (g *GServer) GetTask(_ context.Context, req *cloudtaskspb.GetTaskRequest) (*cloudtaskspb.Task, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, err := g.taskLocked(req.GetName())
	if err != nil {
		return nil, err
	}
	return viewTask(t.pb, req.ResponseView), nil
}

func (g *GServer) taskLocked(name string) (*task, error) {
	if _, _, err := splitTaskName(name); err != nil {
		return nil, err
	}
	t, ok := g.tasks[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "task %q", name)
	}
	return t, nil
}

// ListTasks lists the tasks of a queue in name order, paged.
func (g *GServer) ListTasks(_ context.Context, req *cloudtaskspb.ListTasksRequest) (*cloudtaskspb.ListTasksResponse, error) {
	if err := checkQueueName(req.GetParent()); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	q, err := g.queueLocked(req.Parent)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(q.tasks))
	for name := range q.tasks {
		names = append(names, name)
	}
	selected, next, err := page(names, req.PageSize, maxTaskPage, req.PageToken)
	if err != nil {
		return nil, err
	}
	resp := &cloudtaskspb.ListTasksResponse{NextPageToken: next}
	for _, name := range selected {
		resp.Tasks = append(resp.Tasks, viewTask(q.tasks[name].pb, req.ResponseView))
	}
	return resp, nil
}
