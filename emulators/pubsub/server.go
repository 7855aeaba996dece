// Package pubsub serves Google's Pub/Sub fake, pstest
// (cloud.google.com/go/pubsub/v2/pstest), with a streaming pull that
// delivers as Pub/Sub does. Every method is pstest's but StreamingPull,
// which this package serves from pstest's Pull, Acknowledge and
// ModifyAckDeadline:
//
//	srv, err := pubsub.NewServer("127.0.0.1:8085")
//	...
//	defer srv.Close()
//	// PUBSUB_EMULATOR_HOST=srv.Addr, or option.WithEndpoint(srv.Addr)
//
// pstest's own StreamingPull hands a stream one message per response, and
// at most one per stream every 10 ms (its delivery loop gives up on a
// stream still sending the previous one): about 100 messages a second for
// a subscriber however many are waiting, fewer on a loaded machine. It
// ignores the subscriber's flow control, and a message it hands to a
// stream that is ending is never sent yet stays leased for the stream's
// ack deadline (a minute with the Go client). With message ordering, where
// pstest delivers one message of an ordering key at a time, a consumer
// fell seconds to minutes behind the publications, and every message of a
// key waited behind one that no subscriber had.
//
// Here a stream gets, in one response, every message available, up to the
// MaxOutstandingMessages and MaxOutstandingBytes its client asked for
// (those it has not acknowledged, nacked or let expire count). Messages
// are leased for the stream's ack deadline, as on Pub/Sub: a subscriber
// that stops while some are on their way gets them again once it expires,
// and with ordering the later messages of their keys wait as long (the Go
// client's ReceiveSettings.MaxDurationPerAckExtension shortens it).
// Messages pulled for a stream that ends before they are sent are made
// available again at once. A stream is woken by every publish to its
// topic over gRPC and every acknowledgement or deadline change of its
// subscription, and looks again every pollInterval, for messages whose
// deadline expired and those published in process.
//
// OnPublish observes every message the server takes, as a viewer of the
// traffic would, without the subscription that would change what
// subscribers are leased and what acknowledgements count.
//
// Known differences from Pub/Sub that remain, pstest's:
//
//   - On a subscription with message ordering, one message of an ordering
//     key is outstanding at a time: the next is delivered once the previous
//     is acknowledged (Pub/Sub may send several of a key, in order, and
//     redelivers the later ones when one is nacked or expires). A consumer
//     gets a key's events at the pace it acknowledges them, about ten a
//     second with the Go client, which sends acknowledgements every 100 ms;
//     one that acknowledges a message only after the next of its key
//     arrives never gets it.
//   - A message that is not leased to a subscriber is dropped 10 minutes
//     after its publication, whatever the subscription's retention
//     (Pub/Sub keeps it for the subscription's message retention, 7 days by
//     default): a subscription nobody consumes for 10 minutes loses what
//     it held, and so does an ordering key held that long, for its later
//     messages wait unleased.
//   - Pull reactors (pstest.ServerReactorOption) apply to streams too.
package pubsub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// pollInterval is how often a stream looks for messages when nothing woke
// it: those whose ack deadline expired, and those published through the
// fake's own methods (pstest.Server.Publish) rather than over gRPC.
const pollInterval = 50 * time.Millisecond

// maxPull is the most messages one response carries (pstest's default for
// Pull), and maxResponseBytes the most bytes: the Go client accepts
// responses of up to 20 MiB.
const (
	maxPull          = 1000
	maxResponseBytes = 10 << 20
)

// Server is pstest's fake Pub/Sub served at Addr. The embedded
// pstest.Server is the fake itself (its GServer, Messages, ...); its own
// listener, at pstest.Server.Addr, which Addr shadows, is for nobody.
type Server struct {
	*pstest.Server
	// Addr is where clients connect (PUBSUB_EMULATOR_HOST).
	Addr string

	gsrv *grpc.Server

	mu        sync.Mutex
	streams   map[*stream]struct{}
	observers map[int]func(topic string, m *pb.PubsubMessage)
	observed  int
}

// OnPublish calls f with each message published over gRPC, once the fake
// has taken it (its MessageId and PublishTime set), until stop is called.
// It observes without a subscription: nothing is leased, acknowledged or
// counted, so what a subscriber sees is unchanged. f runs on the
// publisher's call and must not block.
func (s *Server) OnPublish(f func(topic string, m *pb.PubsubMessage)) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.observers == nil {
		s.observers = map[int]func(string, *pb.PubsubMessage){}
	}
	s.observed++
	id := s.observed
	s.observers[id] = f
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.observers, id)
	}
}

// observe tells the observers of a publish that the fake took.
func (s *Server) observe(req *pb.PublishRequest, resp *pb.PublishResponse) {
	s.mu.Lock()
	fs := make([]func(string, *pb.PubsubMessage), 0, len(s.observers))
	for _, f := range s.observers {
		fs = append(fs, f)
	}
	s.mu.Unlock()
	if len(fs) == 0 {
		return
	}
	for i, m := range req.GetMessages() {
		m = proto.Clone(m).(*pb.PubsubMessage)
		if i < len(resp.GetMessageIds()) {
			m.MessageId = resp.GetMessageIds()[i]
			if pm := s.Server.Message(m.MessageId); pm != nil {
				m.PublishTime = timestamppb.New(pm.PublishTime)
			}
		}
		for _, f := range fs {
			f(req.GetTopic(), m)
		}
	}
}

// NewServer listens on addr (host:port; port 0 for a free one) and serves
// a new pstest fake with the reactors opts there.
func NewServer(addr string, opts ...pstest.ServerReactorOption) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pubsub emulator: listen on %s: %w", addr, err)
	}
	s := &Server{
		Server:  pstest.NewServerWithAddress("127.0.0.1:0", opts...),
		Addr:    lis.Addr().String(),
		gsrv:    grpc.NewServer(),
		streams: map[*stream]struct{}{},
	}
	g := &s.Server.GServer
	pb.RegisterPublisherServer(s.gsrv, publisher{g, s})
	pb.RegisterSubscriberServer(s.gsrv, subscriber{g, s})
	pb.RegisterSchemaServiceServer(s.gsrv, g)
	go func() { _ = s.gsrv.Serve(lis) }()
	return s, nil
}

// Close ends every stream and stops the server and the fake.
func (s *Server) Close() error {
	s.gsrv.Stop()
	return s.Server.Close()
}

// publisher is pstest's Publisher; a publish wakes the streams of the
// topic's subscriptions.
type publisher struct {
	*pstest.GServer
	s *Server
}

func (p publisher) Publish(ctx context.Context, req *pb.PublishRequest) (*pb.PublishResponse, error) {
	resp, err := p.GServer.Publish(ctx, req)
	if err == nil {
		p.s.observe(req, resp)
		p.s.wake(func(st *stream) bool { return st.topic == req.GetTopic() })
	}
	return resp, err
}

// subscriber is pstest's Subscriber but for StreamingPull; acknowledgements
// and deadline changes also settle the streams' leases.
type subscriber struct {
	*pstest.GServer
	s *Server
}

func (sb subscriber) Acknowledge(ctx context.Context, req *pb.AcknowledgeRequest) (*emptypb.Empty, error) {
	resp, err := sb.GServer.Acknowledge(ctx, req)
	if err == nil {
		sb.s.settle(req.GetSubscription(), req.GetAckIds(), 0)
	}
	return resp, err
}

func (sb subscriber) ModifyAckDeadline(ctx context.Context, req *pb.ModifyAckDeadlineRequest) (*emptypb.Empty, error) {
	resp, err := sb.GServer.ModifyAckDeadline(ctx, req)
	if err == nil {
		sb.s.settle(req.GetSubscription(), req.GetAckIds(), seconds(req.GetAckDeadlineSeconds()))
	}
	return resp, err
}

// settle records, on the streams of the subscription sub, that ackIDs were
// acknowledged or nacked (d == 0) or leased for d from now, and wakes them:
// an acknowledgement may free the next message of an ordering key, a nack
// makes the message available again.
func (s *Server) settle(sub string, ackIDs []string, d time.Duration) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.streams {
		if st.sub != sub {
			continue
		}
		st.mu.Lock()
		for _, id := range ackIDs {
			l, ok := st.leases[id]
			switch {
			case !ok:
			case d == 0:
				delete(st.leases, id)
			default:
				l.until = now.Add(d)
				st.leases[id] = l
			}
		}
		st.mu.Unlock()
		st.poke()
	}
}

// wake wakes the streams for which match is true.
func (s *Server) wake(match func(*stream) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.streams {
		if match(st) {
			st.poke()
		}
	}
}

// stream is one StreamingPull call.
type stream struct {
	sub, topic string
	props      *pb.StreamingPullResponse_SubscriptionProperties
	woken      chan struct{}

	sendMu sync.Mutex // grpc streams allow one sender at a time
	srv    pb.Subscriber_StreamingPullServer
	ended  bool // the call returned: no more sends

	mu          sync.Mutex
	deadline    time.Duration // the stream's ack deadline
	maxMessages int           // 0: no limit
	maxBytes    int64         // 0: no limit
	protocol    int64
	leases      map[string]lease // by ack ID: what the stream delivered and is outstanding
}

type lease struct {
	until time.Time
	size  int64
}

// poke wakes the stream's delivery loop without blocking.
func (st *stream) poke() {
	select {
	case st.woken <- struct{}{}:
	default:
	}
}

func (sb subscriber) StreamingPull(srv pb.Subscriber_StreamingPullServer) error {
	req, err := srv.Recv()
	if err != nil {
		return err
	}
	ctx := srv.Context()
	sub, err := sb.GetSubscription(ctx, &pb.GetSubscriptionRequest{Subscription: req.GetSubscription()})
	if err != nil {
		return err
	}
	st := &stream{
		sub:   sub.GetName(),
		topic: sub.GetTopic(),
		props: &pb.StreamingPullResponse_SubscriptionProperties{
			ExactlyOnceDeliveryEnabled: sub.GetEnableExactlyOnceDelivery(),
			MessageOrderingEnabled:     sub.GetEnableMessageOrdering(),
		},
		woken:       make(chan struct{}, 1),
		srv:         srv,
		deadline:    streamDeadline(req.GetStreamAckDeadlineSeconds(), sub.GetAckDeadlineSeconds()),
		maxMessages: int(req.GetMaxOutstandingMessages()),
		maxBytes:    req.GetMaxOutstandingBytes(),
		protocol:    req.GetProtocolVersion(),
		leases:      map[string]lease{},
	}
	sb.s.mu.Lock()
	sb.s.streams[st] = struct{}{}
	sb.s.mu.Unlock()
	defer func() {
		sb.s.mu.Lock()
		delete(sb.s.streams, st)
		sb.s.mu.Unlock()
		// The receiving goroutine may still answer a ping.
		st.sendMu.Lock()
		st.ended = true
		st.sendMu.Unlock()
	}()
	// The first request may carry acknowledgements too.
	if err := sb.handle(ctx, st, req, false); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := srv.Recv()
			if err == nil {
				err = sb.handle(ctx, st, req, true)
			}
			if err != nil {
				recvErr <- err
				cancel()
				return
			}
		}
	}()
	err = sb.deliver(ctx, st)
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
	return err
}

// streamDeadline is the lease of the messages a stream delivers: the
// deadline the client asked for (10 s to 600 s), or the subscription's.
func streamDeadline(streamSecs, subSecs int32) time.Duration {
	secs := streamSecs
	if secs <= 0 {
		secs = subSecs
	}
	return seconds(min(max(secs, 10), 600))
}

func seconds(s int32) time.Duration { return time.Duration(s) * time.Second }

// handle applies one request of the client: acknowledgements, deadline
// changes, a new stream ack deadline. An empty request after the first is
// a ping, answered with an empty response from protocol version 1 on, as
// pstest and Pub/Sub do.
func (sb subscriber) handle(ctx context.Context, st *stream, req *pb.StreamingPullRequest, later bool) error {
	if ids := req.GetAckIds(); len(ids) > 0 {
		if _, err := sb.Acknowledge(ctx, &pb.AcknowledgeRequest{Subscription: st.sub, AckIds: ids}); err != nil {
			return err
		}
	}
	ids, secs := req.GetModifyDeadlineAckIds(), req.GetModifyDeadlineSeconds()
	if len(ids) != len(secs) {
		return status.Errorf(codes.InvalidArgument, "%d modify_deadline_ack_ids but %d modify_deadline_seconds", len(ids), len(secs))
	}
	bySecs := map[int32][]string{}
	for i, id := range ids {
		bySecs[secs[i]] = append(bySecs[secs[i]], id)
	}
	for s, ids := range bySecs {
		if _, err := sb.ModifyAckDeadline(ctx, &pb.ModifyAckDeadlineRequest{Subscription: st.sub, AckIds: ids, AckDeadlineSeconds: s}); err != nil {
			return err
		}
	}
	if later && req.GetStreamAckDeadlineSeconds() > 0 {
		st.mu.Lock()
		st.deadline = streamDeadline(req.GetStreamAckDeadlineSeconds(), 0)
		st.mu.Unlock()
	}
	if later && len(req.GetAckIds()) == 0 && len(ids) == 0 && st.protocol >= 1 {
		return st.send(&pb.StreamingPullResponse{})
	}
	return nil
}

func (st *stream) send(resp *pb.StreamingPullResponse) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	if st.ended {
		return status.Error(codes.Canceled, "stream ended")
	}
	return st.srv.Send(resp)
}

// room returns how many more messages the stream may have outstanding
// (maxPull at most), forgetting the leases that expired.
func (st *stream) room(now time.Time) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	for id, l := range st.leases {
		if now.After(l.until) {
			delete(st.leases, id)
		}
	}
	var size int64
	for _, l := range st.leases {
		size += l.size
	}
	if st.maxBytes > 0 && size >= st.maxBytes {
		return 0
	}
	if st.maxMessages > 0 {
		return min(st.maxMessages-len(st.leases), maxPull)
	}
	return maxPull
}

// deliver sends the stream what its subscription has available, whenever
// it has room, until ctx ends.
func (sb subscriber) deliver(ctx context.Context, st *stream) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		if n := st.room(time.Now()); n > 0 {
			resp, err := sb.Pull(ctx, &pb.PullRequest{Subscription: st.sub, MaxMessages: int32(n), ReturnImmediately: true})
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return err
			}
			if msgs := resp.GetReceivedMessages(); len(msgs) > 0 {
				if err := sb.send(ctx, st, msgs); err != nil {
					return err
				}
				continue // there may be more
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-st.woken:
		case <-tick.C:
		}
	}
}

// send leases msgs, pulled for st, for the stream's ack deadline and sends
// them; those it could not send are made available again at once.
func (sb subscriber) send(ctx context.Context, st *stream, msgs []*pb.ReceivedMessage) error {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.GetAckId()
	}
	st.mu.Lock()
	d := st.deadline
	until := time.Now().Add(d)
	for _, m := range msgs {
		st.leases[m.GetAckId()] = lease{until: until, size: int64(proto.Size(m.GetMessage()))}
	}
	st.mu.Unlock()
	// pstest leased them for the subscription's ack deadline.
	if _, err := sb.GServer.ModifyAckDeadline(ctx, &pb.ModifyAckDeadlineRequest{Subscription: st.sub, AckIds: ids, AckDeadlineSeconds: int32(d / time.Second)}); err != nil {
		return sb.giveBack(st, ids, err)
	}
	for i := 0; i < len(msgs); {
		j, size := i, 0
		for j < len(msgs) && (j == i || size+proto.Size(msgs[j]) <= maxResponseBytes) {
			size += proto.Size(msgs[j])
			j++
		}
		if err := st.send(&pb.StreamingPullResponse{ReceivedMessages: msgs[i:j], SubscriptionProperties: st.props}); err != nil {
			return sb.giveBack(st, ids[i:], err)
		}
		i = j
	}
	return nil
}

// giveBack nacks the messages ids that the stream could not send, and
// returns err.
func (sb subscriber) giveBack(st *stream, ids []string, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = sb.ModifyAckDeadline(ctx, &pb.ModifyAckDeadlineRequest{Subscription: st.sub, AckIds: ids, AckDeadlineSeconds: 0})
	return err
}
