package pubsub_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestSeekRedelivers: a subscriber acknowledges a message, seeks to a
// snapshot taken before it was published (or to its publish time), and
// gets it again on the same Receive.
func TestSeekRedelivers(t *testing.T) {
	for _, toTime := range []bool{false, true} {
		name := map[bool]string{false: "snapshot", true: "time"}[toTime]
		t.Run(name, func(t *testing.T) {
			_, c := start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*waitTime)
			defer cancel()
			sub := subscribe(t, c, "seek", false)
			snap := "projects/p/snapshots/before"
			if _, err := c.SubscriptionAdminClient.CreateSnapshot(ctx, &pb.CreateSnapshotRequest{Name: snap, Subscription: sub}); err != nil {
				t.Fatal(err)
			}
			id, err := c.Publisher(topic).Publish(ctx, &pubsub.Message{Data: []byte("x")}).Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan *pubsub.Message, 10)
			rctx, stop := context.WithCancel(ctx)
			defer stop()
			go func() {
				_ = c.Subscriber(sub).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
					m.Ack()
					got <- m
				})
			}()
			first := receive(t, got)
			if first.ID != id {
				t.Fatalf("got %s, want %s", first.ID, id)
			}
			req := &pb.SeekRequest{Subscription: sub, Target: &pb.SeekRequest_Snapshot{Snapshot: snap}}
			if toTime {
				req.Target = &pb.SeekRequest_Time{Time: timestamppb.New(first.PublishTime)}
			}
			if _, err := c.SubscriptionAdminClient.Seek(ctx, req); err != nil {
				t.Fatal(err)
			}
			if again := receive(t, got); again.ID != id {
				t.Fatalf("after the seek got %s, want %s again", again.ID, id)
			}
		})
	}
}

func receive(t *testing.T, got chan *pubsub.Message) *pubsub.Message {
	t.Helper()
	select {
	case m := <-got:
		return m
	case <-time.After(waitTime):
		t.Fatalf("no message after %v", waitTime)
		return nil
	}
}
