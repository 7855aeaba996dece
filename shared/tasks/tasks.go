// Package tasks schedules reconcile runs as Cloud Tasks: one HTTP task per
// run, addressed to the reconcile function, carrying the subject (its kind,
// tenant and ID) and its chain token, with an OIDC token for the function
// to check, and the trace of what asked for the run (LinkHeader).
package tasks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/logging"
)

// Payload is the body of a reconcile task.
type Payload struct {
	Kind     string `json:"kind"`
	TenantID string `json:"tenantId"`
	ID       string `json:"id"`
	Token    string `json:"token"`
}

// LinkHeader carries a task's chain.Kick.Link: the W3C traceparent of the
// span that asked for the chain's work, which the run's span links to. It
// is not the request's own traceparent, so that the run is not made a
// child of a call it may only partly serve (and Cloud Run keeps giving
// each run's request a trace of its own).
const LinkHeader = "X-Kick-Traceparent"

// HintHeader carries a task's chain.Kick.Hint: what its run may start
// reading before its subject's document. It is a header rather than a
// field of the body so that an instance of an older release, whose
// decoder refuses unknown fields, still runs the task (without it).
const HintHeader = "X-Kick-Hint"

// LinkFrom is the link a task's request carries (LinkHeader), empty when
// it carries none or a malformed one.
func LinkFrom(h http.Header) string {
	v := h.Get(LinkHeader)
	if _, ok := logging.ParseTraceparent(v); !ok {
		return ""
	}
	return v
}

// Kick is the run the payload asks for.
func (p Payload) Kick() chain.Kick {
	return chain.Kick{Kind: p.Kind, TenantID: p.TenantID, ID: p.ID, Token: p.Token}
}

// Config says where tasks go.
type Config struct {
	Queue string // projects/P/locations/L/queues/Q
	// SteadyQueues take the runs of steady chains (chain.Kick.Steady),
	// so that a fleet's refreshes never delay a tenant's change, which
	// Queue takes with every other run; each chain on the one its ID
	// hashes to, so that a fleet's refreshes can outgrow one queue's
	// dispatch rate (500 a second). None: Queue takes them all.
	SteadyQueues []string
	// TenantQueues, when more than one, take the other runs (changes and
	// converging chains) in Queue's place: each tenant's on the one its
	// ID hashes to (TenantShard), so that one tenant's many converging
	// chains fill its queue's dispatch rate and concurrency, not the
	// queue of another tenant. None or one: Queue takes them.
	TenantQueues   []string
	URL            string // the reconcile function's URL
	ServiceAccount string // OIDC identity of the tasks
	Audience       string // OIDC audience (the function's URL when empty)
}

// Queue schedules reconcile runs on a Cloud Tasks queue.
type Queue struct {
	client *cloudtasks.Client
	cfg    Config
	now    func() time.Time
}

// New returns a queue over client.
func New(client *cloudtasks.Client, cfg Config) (*Queue, error) {
	if client == nil || cfg.Queue == "" || cfg.URL == "" {
		return nil, errors.New("tasks: New needs a client, a queue and a URL")
	}
	if cfg.Audience == "" {
		cfg.Audience = cfg.URL
	}
	return &Queue{client: client, cfg: cfg, now: time.Now}, nil
}

// URL is where the queue's tasks go (the reconcile function).
func (q *Queue) URL() string { return q.cfg.URL }

// Kick schedules a run now, first of the chain of k's token. Unless k
// has a link already, the task links the run to the span of ctx (the
// tenant's call, the watchdog's pass, a substrate's run).
func (q *Queue) Kick(ctx context.Context, k chain.Kick) error {
	if k.Link == "" {
		c := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(ctx, c)
		k.Link = c["traceparent"]
	}
	return q.Schedule(ctx, k, q.now(), "")
}

// Schedule schedules a run of k's chain at at, carrying k's link. The
// task's name derives from the chain token and the task scheduling it
// (after), so the same scheduling done twice (a redelivered task) makes
// one task: Cloud Tasks answers ALREADY_EXISTS to the second, which is
// success here.
func (q *Queue) Schedule(ctx context.Context, k chain.Kick, at time.Time, after string) error {
	body, err := json.Marshal(Payload{Kind: k.Kind, TenantID: k.TenantID, ID: k.ID, Token: k.Token})
	if err != nil {
		return err
	}
	headers := map[string]string{"Content-Type": "application/json"}
	if k.Link != "" {
		headers[LinkHeader] = k.Link
	}
	if k.Hint != "" {
		headers[HintHeader] = k.Hint
	}
	queue := q.queueOf(k)
	_, err = q.client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{
		Parent: queue,
		Task: &cloudtaskspb.Task{
			Name:         queue + "/tasks/" + TaskID(k, after),
			ScheduleTime: timestamppb.New(at),
			MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
				Url:        q.cfg.URL,
				HttpMethod: cloudtaskspb.HttpMethod_POST,
				Headers:    headers,
				Body:       body,
				AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
					ServiceAccountEmail: q.cfg.ServiceAccount,
					Audience:            q.cfg.Audience,
				}},
			}},
		},
	})
	if status.Code(err) == codes.AlreadyExists {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create task for %s %s: %w", k.Kind, k.ID, err)
	}
	return nil
}

// queueOf is the queue of the runs of k's chain. A chain's token and ID
// decide it, so every task of one chain goes to one queue, where Cloud
// Tasks deduplicates their names; every instance computes the same. A
// change of SteadyQueues moves a steady chain at its next run, where a
// duplicate finds its token stale, as between Queue and a steady queue.
//
// A chain that is not steady goes to its tenant's queue (TenantQueues),
// decided by the tenant's ID alone, so that a change of TenantQueues
// moves it at its next run in the same way.
func (q *Queue) queueOf(k chain.Kick) string {
	if !k.Steady() || len(q.cfg.SteadyQueues) == 0 {
		if n := len(q.cfg.TenantQueues); n > 1 && !k.Steady() {
			return q.cfg.TenantQueues[TenantShard(k.TenantID, n)]
		}
		return q.cfg.Queue
	}
	return q.cfg.SteadyQueues[SteadyShard(k.ID, len(q.cfg.SteadyQueues))]
}

// TenantShard is which of n queues takes the changing chains of tenant:
// FNV-1a of the tenant's ID, as SteadyShard.
func TenantShard(tenant string, n int) int {
	return SteadyShard(tenant, n)
}

// SteadyShard is which of n steady queues takes the steady runs of the
// chain of id: FNV-1a of the ID, so that chains spread evenly whatever
// their IDs look like.
func SteadyShard(id string, n int) int {
	h := fnv.New64a()
	h.Write([]byte(id))
	return int(h.Sum64() % uint64(n))
}

// TaskID is the task ID of a run of k's chain scheduled by the task after
// ("" for a kick).
func TaskID(k chain.Kick, after string) string {
	suffix := "k"
	if after != "" {
		h := sha256.Sum256([]byte(after))
		suffix = hex.EncodeToString(h[:8])
	}
	return k.ID + "-" + k.Token + "-" + suffix
}
