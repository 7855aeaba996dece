package pubsub_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
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
	name = "projects/p/subscriptions/sub-" + name
	_, err := c.SubscriptionAdminClient.CreateSubscription(context.Background(), &pb.Subscription{
		Name: name, Topic: topic, AckDeadlineSeconds: 10, EnableMessageOrdering: ordered,
	})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// msgNumber is a message ID as a number: the emulator's IDs are decimal,
// as Pub/Sub's are, given in the order it takes messages.
func msgNumber(t *testing.T, id string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		t.Fatalf("message ID %q is not a decimal number", id)
	}
	return n
}

// TestReceive publishes a burst over many ordering keys and consumes it
// with the Go client's Receive at its default settings, as a user would:
// every message arrives within a few seconds, and on the
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

// TestOrderedKey: on a subscription with ordering, the stream gets every
// message of a key at once, in order, and when one is nacked it and the
// later ones of its key come again, in order, while what came before
// stays acknowledged.
func TestOrderedKey(t *testing.T) {
	srv, c := start(t)
	sub := subscribe(t, c, "s", true)
	a := publish(t, srv, 4, "a")
	b := publish(t, srv, 1, "b")
	s := openStream(t, c, &pb.StreamingPullRequest{Subscription: sub, StreamAckDeadlineSeconds: 60})
	got := map[string][]*pb.ReceivedMessage{}
	for range 5 {
		m := s.next()
		got[m.GetMessage().GetOrderingKey()] = append(got[m.GetMessage().GetOrderingKey()], m)
	}
	if ids := messageIDs(got["a"]); !slices.Equal(ids, a) {
		t.Fatalf("messages of key a = %v, want %v", ids, a)
	}
	if ids := messageIDs(got["b"]); !slices.Equal(ids, b) {
		t.Fatalf("messages of key b = %v, want %v", ids, b)
	}
	r := <-s.resp
	if !r.GetSubscriptionProperties().GetMessageOrderingEnabled() {
		t.Errorf("response's subscription properties = %v, want message ordering", r.GetSubscriptionProperties())
	}
	// Acknowledge a[0], nack a[1]: a[1], a[2] and a[3] come again in order.
	if err := s.spc.Send(&pb.StreamingPullRequest{AckIds: []string{got["a"][0].GetAckId()},
		ModifyDeadlineAckIds: []string{got["a"][1].GetAckId()}, ModifyDeadlineSeconds: []int32{0}}); err != nil {
		t.Fatal(err)
	}
	var again []*pb.ReceivedMessage
	for range 3 {
		again = append(again, s.next())
	}
	if ids := messageIDs(again); !slices.Equal(ids, a[1:]) {
		t.Errorf("after a nack of %s got %v, want %v", a[1], ids, a[1:])
	}
	s.none(200 * time.Millisecond)
}

func messageIDs(msgs []*pb.ReceivedMessage) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.GetMessage().GetMessageId())
	}
	return out
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
