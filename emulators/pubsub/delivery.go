package pubsub

import (
	"context"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// maxPull is the most messages one pull hands out.
const maxPull = 1000

// pullWait is how long a Pull without return_immediately waits for a
// message before it answers none.
const pullWait = 10 * time.Second

// wake wakes the streams and pulls waiting on the subscription.
func (sub *subscription) wake() {
	for st := range sub.streams {
		st.poke()
	}
}

// ordered says whether the messages of e's ordering key go in order.
func (sub *subscription) ordered(e *entry) bool {
	return sub.pb.EnableMessageOrdering && e.m.pb.OrderingKey != ""
}

// release makes e available again, and forgets it on its stream.
func release(e *entry) {
	if e.owner != nil {
		if _, ok := e.owner.out[e]; ok {
			delete(e.owner.out, e)
			e.owner.outBytes -= e.m.size
		}
	}
	e.owner, e.until = nil, time.Time{}
}

// lease leases e to st (nil for Pull) until until.
func lease(e *entry, st *stream, until time.Time) {
	release(e)
	e.owner, e.until = st, until
	if st != nil {
		st.out[e] = struct{}{}
		st.outBytes += e.m.size
	}
}

// releaseFrom makes e available again and, on a subscription with
// ordering, the later messages of its key that are out too, so that they
// are delivered again in order after it: their ack IDs are void, as
// Pub/Sub redelivers them whether or not they were acknowledged since.
func (sub *subscription) releaseFrom(e *entry) {
	release(e)
	if !sub.ordered(e) {
		return
	}
	key := e.m.pb.OrderingKey
	for _, later := range sub.backlog {
		if later.m.seq > e.m.seq && !later.acked && later.leased() && later.m.pb.OrderingKey == key {
			release(later)
			later.delivery = 0
		}
	}
}

// expire makes available again the messages whose lease ended (with
// ordering, and the later ones of their keys).
func (sub *subscription) expire(now time.Time) {
	var broken map[string]bool
	for _, e := range sub.backlog {
		if e.acked || !e.leased() {
			continue
		}
		key := e.m.pb.OrderingKey
		switch {
		case now.After(e.until):
			release(e)
			if sub.ordered(e) {
				if broken == nil {
					broken = map[string]bool{}
				}
				broken[key] = true
			}
		case broken[key] && sub.ordered(e):
			release(e)
			e.delivery = 0
		}
	}
}

// retainAcked is how long the subscription keeps acknowledged messages:
// its message retention if it retains them, or its topic's retention.
func (s *Server) retainAcked(sub *subscription) time.Duration {
	if sub.pb.RetainAckedMessages {
		return sub.pb.MessageRetentionDuration.AsDuration()
	}
	if t := s.topics[sub.pb.Topic]; t != nil && t.pb.MessageRetentionDuration != nil {
		return t.pb.MessageRetentionDuration.AsDuration()
	}
	return 0
}

// prune drops from the backlog what the subscription no longer keeps:
// messages older than its retention, and acknowledged ones it does not
// retain.
func (s *Server) prune(sub *subscription, now time.Time) {
	keep := sub.pb.MessageRetentionDuration.AsDuration()
	acked := s.retainAcked(sub)
	out := sub.backlog[:0]
	for _, e := range sub.backlog {
		age := now.Sub(e.m.published())
		if age > keep || (e.acked && age > acked) {
			release(e)
			continue
		}
		out = append(out, e)
	}
	clear(sub.backlog[len(out):])
	sub.backlog = out
	sub.pruned = now
	sub.dead = 0
}

// take leases to st (nil for Pull) up to n messages available on sub, and
// up to maxBytes if st has that limit, for d, and returns them.
func (s *Server) take(sub *subscription, st *stream, n int, d time.Duration, now time.Time) []*pb.ReceivedMessage {
	if sub.dead > 64 && sub.dead > len(sub.backlog)/4 || now.Sub(sub.pruned) > time.Second {
		s.prune(sub, now)
	}
	sub.expire(now)
	var out []*pb.ReceivedMessage
	var blocked map[string]bool // ordering keys out on another stream
	for _, e := range sub.backlog {
		if len(out) >= n || (st != nil && st.full()) {
			break
		}
		if e.acked {
			continue
		}
		if now.Before(e.visible) {
			break // and so are the later ones
		}
		if sub.ordered(e) {
			key := e.m.pb.OrderingKey
			if blocked[key] {
				continue
			}
			if e.leased() {
				if e.owner != st {
					if blocked == nil {
						blocked = map[string]bool{}
					}
					blocked[key] = true
				}
				continue
			}
		} else if e.leased() {
			continue
		}
		if p := sub.pb.DeadLetterPolicy; p != nil && p.DeadLetterTopic != "" && e.attempt >= p.MaxDeliveryAttempts {
			s.deadLetter(sub, e, now)
			continue
		}
		e.attempt++
		s.deliveries++
		e.delivery = s.deliveries
		lease(e, st, now.Add(d))
		id := ackID(e.m.seq, e.delivery)
		e.m.modacks = append(e.m.modacks, Modack{AckID: id, AckDeadline: int32(d / time.Second), ReceivedAt: now})
		rm := &pb.ReceivedMessage{AckId: id, Message: e.m.pb}
		if sub.pb.DeadLetterPolicy != nil {
			rm.DeliveryAttempt = e.attempt
		}
		out = append(out, rm)
	}
	return out
}

// deadLetter forwards e to the subscription's dead letter topic, as
// Pub/Sub does once a message was delivered max_delivery_attempts times,
// and acknowledges it.
func (s *Server) deadLetter(sub *subscription, e *entry, now time.Time) {
	e.acked, e.ackedAt = true, now
	sub.dead++
	t := s.topics[sub.pb.DeadLetterPolicy.DeadLetterTopic]
	if t == nil {
		return
	}
	s.seq++
	c := proto.Clone(e.m.pb).(*pb.PubsubMessage)
	c.MessageId = itoa(s.seq)
	c.PublishTime = ts(now)
	m := &message{seq: s.seq, topic: t.pb.Name, pb: c, size: int64(proto.Size(c))}
	s.published = append(s.published, m)
	s.deliverToTopic(t, []*message{m})
}

// ackResult sorts the ack IDs of a request.
type ackResult struct {
	invalid []string // unknown, expired or of another delivery (exactly once only)
}

// settle acknowledges (d < 0) or changes the lease (d >= 0, 0 a nack) of
// the messages ackIDs of sub, delivered to st (nil for Pull). Must be
// called with the lock held.
func (s *Server) settle(sub *subscription, st *stream, ackIDs []string, d time.Duration, now time.Time) ackResult {
	var r ackResult
	exact := sub.pb.EnableExactlyOnceDelivery
	for _, id := range ackIDs {
		seq, delivery, ok := parseAckID(id)
		var e *entry
		if ok {
			e = sub.find(seq)
		}
		if e == nil || e.acked {
			// Acknowledging the same delivery twice is no error.
			if exact && !(e != nil && d < 0 && e.delivery == delivery) {
				r.invalid = append(r.invalid, id)
			}
			continue
		}
		if e.delivery != delivery {
			// An ack ID of an earlier delivery (or of one before a seek)
			// settles nothing.
			if exact {
				r.invalid = append(r.invalid, id)
			}
			continue
		}
		if !e.leased() || now.After(e.until) {
			if exact {
				r.invalid = append(r.invalid, id)
				continue
			}
			// Without exactly once, a late acknowledgement still counts;
			// a late deadline change changes nothing.
			if d >= 0 {
				continue
			}
		}
		switch {
		case d < 0:
			release(e)
			e.acked, e.ackedAt = true, now
			e.m.acks++
			sub.dead++
		case d == 0:
			e.m.modacks = append(e.m.modacks, Modack{AckID: id, ReceivedAt: now})
			sub.releaseFrom(e)
		default:
			e.m.modacks = append(e.m.modacks, Modack{AckID: id, AckDeadline: int32(d / time.Second), ReceivedAt: now})
			owner := e.owner
			if st != nil && (owner == nil || owner.ended) {
				owner = st // the client holds it on a new stream
			}
			lease(e, owner, now.Add(d))
		}
	}
	sub.wake()
	return r
}

// ackError is Pub/Sub's answer, with exactly once delivery, to a request
// that named ack IDs it could not settle: the others were.
func ackError(r ackResult) error {
	if len(r.invalid) == 0 {
		return nil
	}
	md := map[string]string{}
	for _, id := range r.invalid {
		md[id] = "PERMANENT_FAILURE_INVALID_ACK_ID"
	}
	st, err := status.New(codes.InvalidArgument, "Some acknowledgement ids in the request were invalid. This could be because the acknowledgement ids have expired or the acknowledgement ids were malformed.").
		WithDetails(&errdetails.ErrorInfo{Reason: "EXACTLY_ONCE_ACKID_FAILURE", Domain: "pubsub.googleapis.com", Metadata: md})
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return st.Err()
}

// subscriptionFor returns the subscription name, or an error as Pub/Sub
// answers a pull: NOT_FOUND, or FAILED_PRECONDITION once detached. Must be
// called with the lock held.
func (s *Server) subscriptionFor(name string) (*subscription, error) {
	if _, err := parseName(name, "subscriptions"); err != nil {
		return nil, err
	}
	sub, ok := s.subs[name]
	if !ok {
		return nil, notFound(name)
	}
	if sub.pb.Detached {
		return nil, errorf(codes.FailedPrecondition, "Subscription has been detached from its topic (resource=%s).", lastPart(name))
	}
	return sub, nil
}

func (s *Server) Pull(ctx context.Context, req *pb.PullRequest) (*pb.PullResponse, error) {
	if req.GetMaxMessages() <= 0 {
		return nil, errorf(codes.InvalidArgument, "The value for max_messages is too small. You passed %d in the request, but the minimum value is 1.", req.GetMaxMessages())
	}
	n := min(int(req.MaxMessages), maxPull)
	deadline := time.NewTimer(pullWait)
	defer deadline.Stop()
	w := &stream{woken: make(chan struct{}, 1)}
	for {
		s.mu.Lock()
		sub, err := s.subscriptionFor(req.Subscription)
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		msgs := s.take(sub, nil, n, time.Duration(sub.pb.AckDeadlineSeconds)*time.Second, s.now())
		if len(msgs) > 0 || req.ReturnImmediately {
			delete(sub.streams, w)
			s.mu.Unlock()
			return &pb.PullResponse{ReceivedMessages: msgs}, nil
		}
		sub.streams[w] = struct{}{}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			s.forget(req.Subscription, w)
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-deadline.C:
			s.forget(req.Subscription, w)
			return &pb.PullResponse{}, nil
		case <-w.woken:
		case <-time.After(pollInterval):
		}
	}
}

// forget removes the waiting stream w from the subscription name.
func (s *Server) forget(name string, w *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub := s.subs[name]; sub != nil {
		delete(sub.streams, w)
	}
}

func (s *Server) Acknowledge(_ context.Context, req *pb.AcknowledgeRequest) (*emptypb.Empty, error) {
	if len(req.GetAckIds()) == 0 {
		return nil, errorf(codes.InvalidArgument, "No ack ids were provided.")
	}
	s.mu.Lock()
	sub, err := s.subscriptionFor(req.GetSubscription())
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	r := s.settle(sub, nil, req.AckIds, -1, s.now())
	s.mu.Unlock()
	if err := ackError(r); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

func (s *Server) ModifyAckDeadline(_ context.Context, req *pb.ModifyAckDeadlineRequest) (*emptypb.Empty, error) {
	if d := req.GetAckDeadlineSeconds(); d < 0 || d > 600 {
		return nil, errorf(codes.InvalidArgument, "Invalid ack deadline given: %d seconds. It must be between 0 and 600 seconds.", d)
	}
	if len(req.GetAckIds()) == 0 {
		return nil, errorf(codes.InvalidArgument, "No ack ids were provided.")
	}
	s.mu.Lock()
	sub, err := s.subscriptionFor(req.GetSubscription())
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	r := s.settle(sub, nil, req.AckIds, time.Duration(req.AckDeadlineSeconds)*time.Second, s.now())
	s.mu.Unlock()
	if err := ackError(r); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}
