// Package cloudtasks is an in-process emulator of the Cloud Tasks v2 API
// (google.cloud.tasks.v2.CloudTasks) for tests and the local development
// stack. It speaks the real gRPC protocol, so the official client
// cloud.google.com/go/cloudtasks/apiv2 talks to it unchanged, and it
// dispatches HTTP tasks to their URLs with the headers Cloud Tasks sends,
// retrying failures with the queue's backoff.
//
// Supported RPCs: CreateQueue, DeleteQueue, PauseQueue, ResumeQueue,
// CreateTask, GetTask and ListTasks, those that someone calls
// (emulators/README.md). Every other RPC returns UNIMPLEMENTED: GetQueue,
// ListQueues, UpdateQueue, PurgeQueue, DeleteTask and RunTask among them.
//
// How Cloud Tasks delivers, as its documentation says and the emulator
// models it:
//   - Delivery is at least once: "a non-zero number of duplicate
//     executions do occur" (more than 99.999% of tasks run once). With
//     WithDuplicateRate (or Server.SetDuplicateRate) that share of the
//     attempts is delivered twice at the same moment, with the same
//     headers; the task completes with the first success.
//   - A CreateTask that succeeded can look failed to its caller (a
//     deadline, UNAVAILABLE), whose retry then meets ALREADY_EXISTS:
//     Server.LoseNext and LoseShare (package faults) make the emulator
//     create the task and answer the caller with an error.
//   - dispatch_deadline must be between 15 seconds and 30 minutes
//     (INVALID_ARGUMENT otherwise); WithAttemptTimeout cuts attempts
//     shorter in real time, for tests.
//   - On 429 and 503 answers Cloud Tasks "uses a higher backoff rate" and
//     considers Retry-After. The documentation gives no numbers: the
//     emulator waits twice the queue's backoff, and at least what
//     Retry-After asks.
//   - A task's name stays reserved about an hour after the task is
//     deleted, executed or dropped (DefaultTombstone, WithTombstone;
//     about nine days for queues made from queue.yaml, which the emulator
//     does not have), answered ALREADY_EXISTS with Cloud Tasks' message.
//   - A deleted queue's name cannot be used again for 3 days
//     (DefaultQueueTombstone, WithQueueTombstone): CreateQueue answers
//     FAILED_PRECONDITION, and CreateTask in it FAILED_PRECONDITION "The
//     queue no longer exists, though a queue with this name existed
//     recently."
//
// Differences from the real service:
//   - Only HTTP tasks (HttpRequest) are supported; App Engine tasks, OAuth
//     tokens and queue-level HttpTarget overrides return UNIMPLEMENTED.
//   - Tasks are listed in name order.
//   - Durations (backoffs, dispatch deadlines) are used as given, not
//     truncated to seconds or milliseconds, so tests can run retries in
//     milliseconds.
//   - Tombstones last exactly their period, where the service says
//     "about". Tasks are never expired by age (the service deletes them
//     after 31 days).
//   - Duplicates come only from WithDuplicateRate, never by themselves,
//     and only as simultaneous deliveries of one attempt; a duplicate is
//     not held back by max_concurrent_dispatches or the rate limits.
//   - Throttling is per task only: a 429 or 503 does not slow the rest of
//     the queue, the higher error rates that throttle the real service do
//     not, and a new or idle queue's dispatch does not ramp up.
//     Redirects are followed as net/http follows them; max_burst_size is
//     min(100, ceil(max_dispatches_per_second)); the response body is not
//     kept and X-CloudTasks-TaskRetryReason is not sent.
//   - The queue tombstone message of CreateQueue is worded as gcloud
//     shows it, not checked against a recording.
//   - State is in memory, sized for tests and development (tens of
//     thousands of tasks, not millions): creating, deleting and starting a
//     task cost O(log n) in its queue, but each dispatcher pass visits every
//     queue and ListTasks sorts all of a queue's task names for each page.
//   - OIDC tokens come from the function given with WithTokenSource; without
//     one, an attempt of a task with an oidc_token fails (and is retried) as
//     the real service does when it cannot mint a token.
//   - IAM, CMEK, batch and location RPCs are not implemented.
//
// Time: schedule decisions (due times, backoff, rate limits, tombstones) read
// the clock given with WithClock; HTTP deadlines are real time. After moving
// an injected clock forward, call Server.Wake so the dispatcher notices.
//
// Faults: Server embeds a faults.Injector, so calls are failed,
// delayed and counted as in every emulator of this repository (package
// faults says how): FailNext fails the next n calls of an RPC with the
// code and message given, SetLatency delays its calls, AddReactor
// installs any Reactor, Calls counts the calls, and LoseNext and
// LoseShare lose the answers of calls the emulator served. A call that
// FailNext or a reactor answers changes nothing. The official client
// retries some RPCs on UNAVAILABLE (GetTask, ListTasks, DeleteQueue) but
// not CreateTask; each attempt is a
// call. Faults of dispatch are the task handler's to make (its HTTP
// status, its delay past the dispatch deadline), besides duplicates.
package cloudtasks

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"k8s.io/utils/clock"

	"github.com/better-compute/kubernetes/emulators/faults"
)

// TokenSource mints the OIDC ID token sent as "Authorization: Bearer" with
// a task that has an oidc_token. audience is the token's audience (the
// task's URL when the task leaves it empty) and serviceAccount the email the
// token asserts.
type TokenSource func(ctx context.Context, audience, serviceAccount string) (string, error)

// Option configures a Server.
type Option func(*config)

type config struct {
	addr           string
	now            func() time.Time
	tombstone      time.Duration
	queueTombstone time.Duration
	attemptTimeout time.Duration
	duplicateRate  float64
	tokens         TokenSource
	httpClient     *http.Client
	logger         *slog.Logger
}

// WithAddr makes the server listen on addr (host:port) instead of
// 127.0.0.1:0.
func WithAddr(addr string) Option { return func(c *config) { c.addr = addr } }

// WithClock sets the clock of every schedule decision (nil: the real
// one). It is read from several goroutines, so it must be safe for
// concurrent use. Call Server.Wake after moving the clock forward.
func WithClock(c clock.PassiveClock) Option {
	return func(cfg *config) {
		if c != nil {
			cfg.now = c.Now
		}
	}
}

// WithTombstone sets how long the name of a deleted, executed or dropped
// task stays reserved: CreateTask with that name returns ALREADY_EXISTS
// until then. The default is DefaultTombstone; zero frees names at once.
func WithTombstone(d time.Duration) Option { return func(c *config) { c.tombstone = d } }

// WithQueueTombstone sets how long the name of a deleted queue stays
// reserved: CreateQueue with that name returns FAILED_PRECONDITION until
// then. The default is DefaultQueueTombstone; zero frees names at once.
func WithQueueTombstone(d time.Duration) Option { return func(c *config) { c.queueTombstone = d } }

// WithAttemptTimeout bounds each HTTP attempt by d of real time when d is
// shorter than the task's dispatch_deadline (which Cloud Tasks keeps
// between 15 s and 30 min), so that a test sees a deadline pass in
// milliseconds. The attempt ends as one past its deadline does. Zero (the
// default) means the dispatch deadline alone.
func WithAttemptTimeout(d time.Duration) Option { return func(c *config) { c.attemptTimeout = d } }

// WithDuplicateRate makes the dispatcher deliver that share (0 to 1) of
// its attempts twice, at the same moment, as Cloud Tasks occasionally
// does (fewer than 0.001% of tasks in production, by its documentation).
// The default is 0. Server.SetDuplicateRate changes it later.
func WithDuplicateRate(f float64) Option { return func(c *config) { c.duplicateRate = f } }

// WithTokenSource sets the function that mints OIDC tokens for tasks with an
// oidc_token.
func WithTokenSource(ts TokenSource) Option { return func(c *config) { c.tokens = ts } }

// WithHTTPClient sets the client tasks are dispatched with (for example an
// httptest TLS server's client). Its Timeout should be zero: each attempt is
// bounded by the task's dispatch_deadline.
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.httpClient = hc } }

// WithLogger sets the logger for dispatch, retries and dropped tasks. The
// default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// Server is a running emulator: a gRPC server on Addr and a dispatcher
// sending due tasks to their URLs. Its helpers inspect state and inject
// faults for tests.
type Server struct {
	// GServer implements the gRPC service; tests rarely need it directly.
	GServer *GServer
	// Injector fails, delays and counts the calls of every RPC (package
	// faults): its FailNext, SetLatency, AddReactor and Calls are the
	// Server's.
	*faults.Injector

	lis  net.Listener
	gsrv *grpc.Server
}

// Stats counts dispatch outcomes since the server started.
type Stats struct {
	Dispatched int // HTTP attempts started, duplicates included
	Succeeded  int // attempts answered with a 2xx status
	Failed     int // attempts that got another status, an error or timed out
	Dropped    int // tasks deleted after exhausting their retries
	Duplicated int // attempts delivered a second time (WithDuplicateRate)
}

// Durations of the real service, the defaults of WithTombstone and
// WithQueueTombstone.
const (
	// DefaultTombstone: "another task with the same name can't be created
	// for ~1 hour after the original task was deleted or executed"
	// (CreateTaskRequest; ~9 days for queues made from queue.yaml, which
	// the emulator does not have).
	DefaultTombstone = time.Hour
	// DefaultQueueTombstone: a deleted queue's name can be used again
	// after 3 days (Cloud Tasks' "Issues and limitations").
	DefaultQueueTombstone = 72 * time.Hour
)

// NewServer starts an emulator listening on 127.0.0.1:0 (or WithAddr)
// and its dispatcher. Stop it with Close.
func NewServer(opts ...Option) (*Server, error) {
	cfg := config{
		addr:           "127.0.0.1:0",
		now:            time.Now,
		tombstone:      DefaultTombstone,
		queueTombstone: DefaultQueueTombstone,
		logger:         slog.Default(),
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.httpClient == nil {
		cfg.httpClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	lis, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("cloud tasks emulator: listen on %s: %w", cfg.addr, err)
	}
	g := newGServer(cfg)
	inj := &faults.Injector{}
	gsrv := grpc.NewServer(grpc.UnaryInterceptor(inj.UnaryInterceptor))
	cloudtaskspb.RegisterCloudTasksServer(gsrv, g)
	inj.SetMethods(faults.MethodsOf(gsrv))
	go func() { _ = gsrv.Serve(lis) }()
	go g.dispatchLoop()
	return &Server{GServer: g, Injector: inj, lis: lis, gsrv: gsrv}, nil
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// ClientOptions returns the options that point the official client at this
// server over an insecure connection without credentials:
//
//	client, err := cloudtasks.NewClient(ctx, srv.ClientOptions()...)
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.Addr()),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// Close stops the gRPC server and the dispatcher, then waits for in-flight
// HTTP attempts to finish (each is bounded by its dispatch deadline).
// Tasks not yet dispatched are never sent.
func (s *Server) Close() error {
	s.gsrv.Stop()
	s.GServer.close()
	return nil
}

// Tasks returns copies (full view) of the tasks in queue, a full queue name,
// sorted by name. Tasks being dispatched are included; completed ones are
// not.
func (s *Server) Tasks(queue string) []*cloudtaskspb.Task {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	q, ok := g.queues[queue]
	if !ok {
		return nil
	}
	out := make([]*cloudtaskspb.Task, 0, len(q.tasks))
	for _, t := range q.tasks {
		out = append(out, viewTask(t.pb, cloudtaskspb.Task_FULL))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Stats returns the dispatch counters.
func (s *Server) Stats() Stats {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats
}

// WaitIdle blocks until nothing is in flight and no task in a running queue
// is due at the clock's current time, or until ctx is done. Tasks scheduled
// later (including retries waiting out their backoff) do not keep it
// waiting, and neither do tasks of paused queues. A due task held back by
// max_dispatches_per_second does, so with a frozen injected clock a
// rate-limited backlog makes WaitIdle wait for ctx.
func (s *Server) WaitIdle(ctx context.Context) error {
	g := s.GServer
	for {
		g.mu.Lock()
		idle := g.idleLocked()
		changed := g.changed
		g.mu.Unlock()
		if idle {
			return nil
		}
		// An injected clock may have moved without Wake; a due task must
		// not wait for the dispatcher's real-time timer.
		g.wakeDispatcher()
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("wait for idle cloud tasks emulator: %w", ctx.Err())
		}
	}
}

// SetDuplicateRate makes the dispatcher deliver that share (0 to 1) of
// its later attempts twice (WithDuplicateRate).
func (s *Server) SetDuplicateRate(f float64) {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cfg.duplicateRate = f
}

// Wake makes the dispatcher read the clock again and send the tasks now
// due. Call it after moving a clock injected with WithClock.
func (s *Server) Wake() { s.GServer.wakeDispatcher() }

// GServer implements cloudtaskspb.CloudTasksServer over in-memory state. One
// mutex guards all of it; methods named ...Locked must be called with it
// held.
type GServer struct {
	cloudtaskspb.UnimplementedCloudTasksServer

	cfg config

	mu         sync.Mutex
	queues     map[string]*queue // by full queue name
	tasks      map[string]*task  // by full task name
	tombstones map[string]time.Time
	// queueTombstones holds when each deleted queue was deleted.
	queueTombstones map[string]time.Time
	lastSweep       time.Time
	stats           Stats
	inflight        int
	changed         chan struct{} // closed and replaced on every state change
	closed          bool

	wake     chan struct{} // buffered; nudges the dispatcher
	done     chan struct{} // closed by close
	loopDone chan struct{} // closed when dispatchLoop returns
	attempts sync.WaitGroup
}

var _ cloudtaskspb.CloudTasksServer = (*GServer)(nil)

type queue struct {
	pb    *cloudtaskspb.Queue
	tasks map[string]*task
	// waiting holds the tasks that are not in flight, next due first, so
	// that a dispatcher pass looks only at the tasks it starts and at the
	// one that stops it.
	waiting  taskHeap
	inflight int
	tokens   float64
	refilled time.Time
}

type task struct {
	pb *cloudtaskspb.Task
	// due is pb.ScheduleTime, converted once rather than in every
	// comparison of the dispatcher.
	due time.Time
	// index is the task's position in queue.waiting, -1 when it is not
	// there (in flight or removed).
	index    int
	queue    *queue
	inflight int
	// executions counts responses below 500, which Cloud Tasks reports as
	// X-CloudTasks-TaskExecutionCount.
	executions int
	// lastStatus is the HTTP status of the last response, 0 if none.
	lastStatus int
}

func newGServer(cfg config) *GServer {
	return &GServer{
		cfg:             cfg,
		queues:          map[string]*queue{},
		tasks:           map[string]*task{},
		tombstones:      map[string]time.Time{},
		queueTombstones: map[string]time.Time{},
		changed:         make(chan struct{}),
		wake:            make(chan struct{}, 1),
		done:            make(chan struct{}),
		loopDone:        make(chan struct{}),
	}
}

func (g *GServer) now() time.Time { return g.cfg.now() }

// notifyLocked tells WaitIdle callers that the state changed.
func (g *GServer) notifyLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *GServer) wakeDispatcher() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

func (g *GServer) idleLocked() bool {
	if g.inflight > 0 {
		return false
	}
	// With nothing in flight every task is waiting, so each running queue's
	// next task tells whether one is due.
	now := g.now()
	for _, q := range g.queues {
		if q.pb.State == cloudtaskspb.Queue_RUNNING && len(q.waiting) > 0 && !q.waiting[0].due.After(now) {
			return false
		}
	}
	return true
}

func (g *GServer) close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	g.mu.Unlock()
	close(g.done)
	<-g.loopDone
	g.attempts.Wait()
	if tr, ok := g.cfg.httpClient.Transport.(interface{ CloseIdleConnections() }); ok {
		tr.CloseIdleConnections()
	}
}

// copyQueue returns a copy callers may keep and change.
func copyQueue(q *cloudtaskspb.Queue) *cloudtaskspb.Queue {
	return proto.Clone(q).(*cloudtaskspb.Queue)
}

// viewTask returns a copy of t as seen through view.
func viewTask(t *cloudtaskspb.Task, view cloudtaskspb.Task_View) *cloudtaskspb.Task {
	c := proto.Clone(t).(*cloudtaskspb.Task)
	if view == cloudtaskspb.Task_VIEW_UNSPECIFIED {
		view = cloudtaskspb.Task_BASIC
	}
	c.View = view
	return c
}
