package pubsub_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	psemu "github.com/better-compute/kubernetes/emulators/pubsub"
)

const (
	project = "p"
	topic   = "projects/p/topics/events"
	// waitTime bounds every wait for something that should happen.
	waitTime = 10 * time.Second
)

func start(t *testing.T) (*psemu.Server, *pubsub.Client) {
	t.Helper()
	srv, err := psemu.NewServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := pubsub.NewClient(ctx, project, option.WithEndpoint(srv.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		srv.Close()
	})
	if _, err := c.TopicAdminClient.CreateTopic(ctx, &pb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	return srv, c
}

func subscribe(t *testing.T, c *pubsub.Client, name string, ordered bool) string {
	t.Helper()
	name = "projects/p/subscriptions/" + name
	_, err := c.SubscriptionAdminClient.CreateSubscription(context.Background(), &pb.Subscription{
		Name: name, Topic: topic, AckDeadlineSeconds: 10, EnableMessageOrdering: ordered,
	})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// msgNumber is the sequence number of a pstest message ID ("m12"), which
// pstest gives in the order it accepts messages.
func msgNumber(t *testing.T, id string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimPrefix(id, "m"))
	if err != nil {
		t.Fatalf("message ID %q is not pstest's m<number>", id)
	}
	return n
}

// TestReceive publishes a burst over many ordering keys and consumes it
// with the Go client's Receive at its default settings, as a user would:
// every message arrives within a few seconds (pstest's own streaming
// delivers one message per 10 ms, eight seconds for these), and on the
// subscription with ordering each key's in the order of publication.
func TestReceive(t *testing.T) {
	const keys, perKey = 400, 2
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			_, c := start(t)
			sub := subscribe(t, c, "s", ordered)
			pub := c.Publisher(topic)
			pub.EnableMessageOrdering = true
			defer pub.Stop()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			var (
				mu     sync.Mutex
				byKey  = map[string][]string{} // message IDs in order of first arrival
				seen   = map[string]bool{}
				change = make(chan struct{}, 1)
			)
			done := make(chan error, 1)
			go func() {
				done <- c.Subscriber(sub).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
					mu.Lock()
					if !seen[m.ID] {
						seen[m.ID] = true
						byKey[m.OrderingKey] = append(byKey[m.OrderingKey], m.ID)
					}
					mu.Unlock()
					m.Ack()
					select {
					case change <- struct{}{}:
					default:
					}
				})
			}()

			var results []*pubsub.PublishResult
			for i := range perKey {
				for k := range keys {
					results = append(results, pub.Publish(ctx, &pubsub.Message{Data: []byte(strconv.Itoa(i)), OrderingKey: fmt.Sprintf("k%d", k)}))
				}
			}
			for _, r := range results {
				if _, err := r.Get(ctx); err != nil {
					t.Fatal(err)
				}
			}
			const limit = 4 * time.Second
			deadline := time.NewTimer(limit)
			defer deadline.Stop()
			for {
				mu.Lock()
				n := len(seen)
				mu.Unlock()
				if n == keys*perKey {
					break
				}
				select {
				case <-change:
				case err := <-done:
					t.Fatalf("Receive returned %v", err)
				case <-deadline.C:
					t.Fatalf("%d of %d messages received %v after their publication", n, keys*perKey, limit)
				}
			}
			if !ordered {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for key, ids := range byKey {
				for i := 1; i < len(ids); i++ {
					if msgNumber(t, ids[i-1]) > msgNumber(t, ids[i]) {
						t.Errorf("messages of key %s arrived in the order %v, want the order of publication", key, ids)
						break
					}
				}
			}
		})
	}
}

// stream is a raw StreamingPull call, to see what the server sends.
type stream struct {
	t    *testing.T
	spc  pb.Subscriber_StreamingPullClient
	msgs chan *pb.ReceivedMessage
	resp chan *pb.StreamingPullResponse
}

func openStream(t *testing.T, c *pubsub.Client, first *pb.StreamingPullRequest) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	spc, err := c.SubscriptionAdminClient.StreamingPull(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := spc.Send(first); err != nil {
		t.Fatal(err)
	}
	s := &stream{t: t, spc: spc, msgs: make(chan *pb.ReceivedMessage, 1000), resp: make(chan *pb.StreamingPullResponse, 100)}
	go func() {
		for {
			r, err := spc.Recv()
			if err != nil {
				close(s.msgs)
				return
			}
			s.resp <- r
			for _, m := range r.ReceivedMessages {
				s.msgs <- m
			}
		}
	}()
	return s
}

// next returns the next message the stream gets.
func (s *stream) next() *pb.ReceivedMessage {
	s.t.Helper()
	select {
	case m, ok := <-s.msgs:
		if !ok {
			s.t.Fatal("stream ended")
		}
		return m
	case <-time.After(waitTime):
		s.t.Fatalf("no message after %v", waitTime)
		return nil
	}
}

// none checks that no message arrives for a while.
func (s *stream) none(d time.Duration) {
	s.t.Helper()
	select {
	case m := <-s.msgs:
		s.t.Fatalf("message %s arrived, want none", m.GetAckId())
	case <-time.After(d):
	}
}

func publish(t *testing.T, srv *psemu.Server, n int, key string) []string {
	t.Helper()
	var ids []string
	for i := range n {
		ids = append(ids, srv.PublishOrdered(topic, []byte(strconv.Itoa(i)), nil, key))
	}
	return ids
}

// TestFlowControl: a stream gets no more messages than the client's
// MaxOutstandingMessages at once, and more as it acknowledges them.
func TestFlowControl(t *testing.T) {
	srv, c := start(t)
	sub := subscribe(t, c, "s", false)
	publish(t, srv, 20, "")
	s := openStream(t, c, &pb.StreamingPullRequest{Subscription: sub, StreamAckDeadlineSeconds: 60, MaxOutstandingMessages: 5})
	var got []string
	for range 5 {
		got = append(got, s.next().GetAckId())
	}
	s.none(300 * time.Millisecond)
	if err := s.spc.Send(&pb.StreamingPullRequest{AckIds: got[:2]}); err != nil {
		t.Fatal(err)
	}
	s.next()
	s.next()
	s.none(300 * time.Millisecond)
}

// TestStreamLease: messages delivered on a stream are leased for the
// stream's ack deadline; a nack makes a message available again at once.
func TestStreamLease(t *testing.T) {
	srv, c := start(t)
	sub := subscribe(t, c, "s", false)
	id := publish(t, srv, 1, "")[0]
	s := openStream(t, c, &pb.StreamingPullRequest{Subscription: sub, StreamAckDeadlineSeconds: 45})
	m := s.next()
	modacks := srv.Message(id).Modacks
	if len(modacks) != 1 || modacks[0].AckDeadline != 45 {
		t.Errorf("modacks of the delivered message = %+v, want one of 45 s, the stream's deadline", modacks)
	}
	if err := s.spc.Send(&pb.StreamingPullRequest{ModifyDeadlineAckIds: []string{m.GetAckId()}, ModifyDeadlineSeconds: []int32{0}}); err != nil {
		t.Fatal(err)
	}
	again := s.next()
	if again.GetMessage().GetMessageId() != id || again.GetAckId() == m.GetAckId() {
		t.Errorf("after a nack of %s got %s, want %s delivered again", m.GetAckId(), again.GetAckId(), id)
	}
}

// TestOrderedKey: on a subscription with ordering, the stream gets the
// first message of every key at once, and a key's next once the previous
// is acknowledged (pstest's rule).
func TestOrderedKey(t *testing.T) {
	srv, c := start(t)
	sub := subscribe(t, c, "s", true)
	a := publish(t, srv, 3, "a")
	b := publish(t, srv, 1, "b")
	s := openStream(t, c, &pb.StreamingPullRequest{Subscription: sub, StreamAckDeadlineSeconds: 60})
	first := map[string]*pb.ReceivedMessage{}
	for range 2 {
		m := s.next()
		first[m.GetMessage().GetOrderingKey()] = m
	}
	if first["a"].GetMessage().GetMessageId() != a[0] || first["b"].GetMessage().GetMessageId() != b[0] {
		t.Fatalf("first messages = %v, want %s of a and %s of b", first, a[0], b[0])
	}
	r := <-s.resp
	if !r.GetSubscriptionProperties().GetMessageOrderingEnabled() {
		t.Errorf("response's subscription properties = %v, want message ordering", r.GetSubscriptionProperties())
	}
	s.none(200 * time.Millisecond)
	for _, want := range a[1:] {
		if err := s.spc.Send(&pb.StreamingPullRequest{AckIds: []string{first["a"].GetAckId()}}); err != nil {
			t.Fatal(err)
		}
		m := s.next()
		if m.GetMessage().GetMessageId() != want {
			t.Fatalf("after the ack of %s got %s, want %s", first["a"].GetMessage().GetMessageId(), m.GetMessage().GetMessageId(), want)
		}
		first["a"] = m
	}
}

// TestPing: an empty request after the first is a ping, answered with an
// empty response from protocol version 1 on.
func TestPing(t *testing.T) {
	_, c := start(t)
	sub := subscribe(t, c, "s", false)
	s := openStream(t, c, &pb.StreamingPullRequest{Subscription: sub, StreamAckDeadlineSeconds: 60, ProtocolVersion: 1})
	if err := s.spc.Send(&pb.StreamingPullRequest{}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-s.resp:
		if len(r.GetReceivedMessages()) != 0 {
			t.Errorf("answer to a ping = %v, want an empty response", r)
		}
	case <-time.After(waitTime):
		t.Fatalf("no answer to a ping after %v", waitTime)
	}
}
