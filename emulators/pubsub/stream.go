package pubsub

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// pollInterval is how often a stream looks for messages when nothing woke
// it: for those whose lease expired.
const pollInterval = 50 * time.Millisecond

// maxResponseBytes is the most bytes one StreamingPull response carries
// (the Go client accepts up to 20 MiB): a larger delivery is split.
const maxResponseBytes = 10 << 20

// stream is one StreamingPull call, or a Pull waiting for a message (then
// only woken is used). Its fields but woken, srv and sendMu are guarded
// by the Server's mutex.
type stream struct {
	woken chan struct{}

	sendMu sync.Mutex // a gRPC stream allows one sender at a time
	srv    pb.Subscriber_StreamingPullServer

	sub         *subscription
	name        string
	props       *pb.StreamingPullResponse_SubscriptionProperties
	deadline    time.Duration // the lease of what it delivers
	maxMessages int           // 0: no limit
	maxBytes    int64         // 0: no limit
	protocol    int64
	ended       bool

	// out are the messages delivered on the stream and not yet settled.
	out      map[*entry]struct{}
	outBytes int64
}

// poke wakes the stream without blocking.
func (st *stream) poke() {
	select {
	case st.woken <- struct{}{}:
	default:
	}
}

// full says whether the stream has as many messages or bytes out as its
// client's flow control allows.
func (st *stream) full() bool {
	return (st.maxMessages > 0 && len(st.out) >= st.maxMessages) || (st.maxBytes > 0 && st.outBytes >= st.maxBytes)
}

// streamDeadline is the lease of the messages a stream delivers: the
// deadline the client asked for (10 s to 600 s), or the subscription's.
func streamDeadline(streamSecs, subSecs int32) time.Duration {
	secs := streamSecs
	if secs <= 0 {
		secs = subSecs
	}
	return time.Duration(min(max(secs, 10), 600)) * time.Second
}

// StreamingPull delivers a subscription's messages as they come, within
// the flow control of the client's first request, and applies the
// acknowledgements and deadline changes of its later requests.
func (s *Server) StreamingPull(srv pb.Subscriber_StreamingPullServer) error {
	req, err := srv.Recv()
	if err != nil {
		return err
	}
	if req.GetStreamAckDeadlineSeconds() < 0 || req.GetStreamAckDeadlineSeconds() > 600 {
		return errorf(codes.InvalidArgument, "Invalid stream_ack_deadline_seconds(%d). Must be between 10 and 600 seconds.", req.GetStreamAckDeadlineSeconds())
	}
	s.mu.Lock()
	sub, err := s.subscriptionFor(req.GetSubscription())
	if err != nil {
		s.mu.Unlock()
		return err
	}
	st := &stream{
		woken: make(chan struct{}, 1),
		srv:   srv,
		sub:   sub,
		name:  sub.pb.Name,
		props: &pb.StreamingPullResponse_SubscriptionProperties{
			ExactlyOnceDeliveryEnabled: sub.pb.EnableExactlyOnceDelivery,
			MessageOrderingEnabled:     sub.pb.EnableMessageOrdering,
		},
		deadline:    streamDeadline(req.GetStreamAckDeadlineSeconds(), sub.pb.AckDeadlineSeconds),
		maxMessages: int(req.GetMaxOutstandingMessages()),
		maxBytes:    req.GetMaxOutstandingBytes(),
		protocol:    req.GetProtocolVersion(),
		out:         map[*entry]struct{}{},
	}
	sub.streams[st] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(sub.streams, st)
		st.ended = true
		s.mu.Unlock()
		st.sendMu.Lock()
		st.srv = nil
		st.sendMu.Unlock()
	}()
	if err := s.handle(st, req, false); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(srv.Context())
	defer cancel()
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := srv.Recv()
			if err == nil {
				err = s.handle(st, req, true)
			}
			if err != nil {
				recvErr <- err
				cancel()
				return
			}
		}
	}()
	err = s.deliver(ctx, st)
	cancel()
	select {
	case rerr := <-recvErr:
		if errors.Is(rerr, io.EOF) {
			return nil // the client closed the stream
		}
		if err == nil || errors.Is(err, context.Canceled) {
			return rerr
		}
	default:
	}
	if errors.Is(err, context.Canceled) {
		return status.FromContextError(err).Err()
	}
	return err
}

// handle applies one request of a stream's client: acknowledgements,
// deadline changes, a new stream ack deadline. An empty request after the
// first is a ping, answered with an empty response from protocol version
// 1 on, as Pub/Sub does.
func (s *Server) handle(st *stream, req *pb.StreamingPullRequest, later bool) error {
	ids, secs := req.GetModifyDeadlineAckIds(), req.GetModifyDeadlineSeconds()
	if len(ids) != len(secs) {
		return errorf(codes.InvalidArgument, "Request contains %d modify_deadline_ack_ids but %d modify_deadline_seconds.", len(ids), len(secs))
	}
	for _, d := range secs {
		if d < 0 || d > 600 {
			return errorf(codes.InvalidArgument, "Invalid ack deadline given: %d seconds. It must be between 0 and 600 seconds.", d)
		}
	}
	s.mu.Lock()
	now := s.now()
	if acks := req.GetAckIds(); len(acks) > 0 {
		s.settle(st.sub, st, acks, -1, now)
	}
	for i, id := range ids {
		s.settle(st.sub, st, []string{id}, time.Duration(secs[i])*time.Second, now)
	}
	if later && req.GetStreamAckDeadlineSeconds() > 0 {
		st.deadline = streamDeadline(req.GetStreamAckDeadlineSeconds(), 0)
	}
	ping := later && len(req.GetAckIds()) == 0 && len(ids) == 0 && st.protocol >= 1
	s.mu.Unlock()
	if ping {
		return st.send(&pb.StreamingPullResponse{})
	}
	return nil
}

func (st *stream) send(resp *pb.StreamingPullResponse) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	if st.srv == nil {
		return status.Error(codes.Canceled, "stream ended")
	}
	return st.srv.Send(resp)
}

// deliver sends the stream what its subscription has available, whenever
// its flow control has room, until ctx ends.
func (s *Server) deliver(ctx context.Context, st *stream) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		s.mu.Lock()
		var msgs []*pb.ReceivedMessage
		switch {
		case s.subs[st.name] != st.sub:
			s.mu.Unlock()
			return notFound(st.name)
		case st.sub.pb.Detached:
			s.mu.Unlock()
			return errorf(codes.FailedPrecondition, "Subscription has been detached from its topic (resource=%s).", lastPart(st.name))
		default:
			msgs = s.take(st.sub, st, maxPull, st.deadline, s.now())
		}
		s.mu.Unlock()
		if len(msgs) > 0 {
			if err := s.sendAll(st, msgs); err != nil {
				return err
			}
			continue // there may be more
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-st.woken:
		case <-tick.C:
		}
	}
}

// sendAll sends msgs, in responses of at most maxResponseBytes; those it
// could not send are available again at once.
func (s *Server) sendAll(st *stream, msgs []*pb.ReceivedMessage) error {
	for i := 0; i < len(msgs); {
		j, size := i, 0
		for j < len(msgs) && (j == i || size+proto.Size(msgs[j]) <= maxResponseBytes) {
			size += proto.Size(msgs[j])
			j++
		}
		if err := st.send(&pb.StreamingPullResponse{ReceivedMessages: msgs[i:j], SubscriptionProperties: st.props}); err != nil {
			s.giveBack(st, msgs[i:])
			return err
		}
		i = j
	}
	return nil
}

// giveBack makes msgs, leased to st but not sent, available again.
func (s *Server) giveBack(st *stream, msgs []*pb.ReceivedMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		seq, delivery, _ := parseAckID(m.AckId)
		if e := st.sub.find(seq); e != nil && e.owner == st && e.delivery == delivery && !e.acked {
			st.sub.releaseFrom(e)
		}
	}
	st.sub.wake()
}
