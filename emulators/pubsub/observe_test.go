package pubsub_test

import (
	"context"
	"sync"
	"testing"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/better-compute/kubernetes/shared/wait"
)

// TestOnPublish: an observer sees every message a publisher's call took,
// with its ID and publish time, and a subscriber still gets them all.
func TestOnPublish(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()
	sub := subscribe(t, c, "after", false)

	var mu sync.Mutex
	var seen []*pb.PubsubMessage
	stop := srv.OnPublish(func(topic string, m *pb.PubsubMessage) {
		if topic != "projects/p/topics/events" {
			t.Errorf("observed topic %q", topic)
		}
		mu.Lock()
		seen = append(seen, m)
		mu.Unlock()
	})
	resp, err := c.TopicAdminClient.Publish(ctx, &pb.PublishRequest{Topic: "projects/p/topics/events", Messages: []*pb.PubsubMessage{
		{Data: []byte("one"), Attributes: map[string]string{"k": "1"}}, {Data: []byte("two")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// A refused publish is not observed.
	if _, err := c.TopicAdminClient.Publish(ctx, &pb.PublishRequest{Topic: "projects/p/topics/missing", Messages: []*pb.PubsubMessage{{Data: []byte("x")}}}); err == nil {
		t.Fatal("publish to a missing topic succeeded")
	}
	stop()
	if _, err := c.TopicAdminClient.Publish(ctx, &pb.PublishRequest{Topic: "projects/p/topics/events", Messages: []*pb.PubsubMessage{{Data: []byte("after stop")}}}); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("observed %d messages, want 2", len(seen))
	}
	for i, m := range seen {
		if m.GetMessageId() != resp.GetMessageIds()[i] || m.GetPublishTime() == nil || m.GetPublishTime().AsTime().IsZero() {
			t.Errorf("observed message %d = id %q time %v, want id %q and a publish time", i, m.GetMessageId(), m.GetPublishTime(), resp.GetMessageIds()[i])
		}
	}
	if string(seen[0].GetData()) != "one" || seen[0].GetAttributes()["k"] != "1" || string(seen[1].GetData()) != "two" {
		t.Errorf("observed %v, want the published messages", seen)
	}

	// A pull answers what is available, which may not be all yet.
	pulled := 0
	wait.Until(t, "the subscriber pulls all 3 messages", func() bool {
		resp, err := c.SubscriptionAdminClient.Pull(ctx, &pb.PullRequest{Subscription: sub, MaxMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		pulled += len(resp.GetReceivedMessages())
		return pulled >= 3
	})
	if pulled != 3 {
		t.Errorf("subscriber pulled %d messages, want 3", pulled)
	}
}
