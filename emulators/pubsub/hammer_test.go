package pubsub_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/better-compute/kubernetes/shared/wait"
)

// TestHammer: several publishers publish at once over many ordering keys
// to an ordered subscription that two subscribers (each its own client)
// consume, nacking some messages: every message arrives, and each key's
// messages first arrive in the order of publication.
func TestHammer(t *testing.T) {
	const publishers, perPublisher, keys = 4, 250, 20
	srv, c := start(t)
	sub := subscribe(t, c, "hammer", true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		mu       sync.Mutex
		arrivals = map[string][]int64{} // by key: IDs in order of arrival
		nacked   = map[int64]bool{}
		acked    = map[int64]bool{}
		wg       sync.WaitGroup
	)
	for range 2 {
		sc, err := pubsub.NewClient(ctx, project, option.WithEndpoint(srv.Addr), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		s := sc.Subscriber(sub)
		s.ReceiveSettings.MaxOutstandingMessages = 50
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.Receive(ctx, func(_ context.Context, m *pubsub.Message) {
				id, err := strconv.ParseInt(m.ID, 10, 64)
				if err != nil {
					t.Errorf("message ID %q is not a decimal number", m.ID)
				}
				mu.Lock()
				arrivals[m.OrderingKey] = append(arrivals[m.OrderingKey], id)
				// Nack every 17th message once: it and the later ones of
				// its key come again, in order.
				nack := id%17 == 0 && !nacked[id]
				if nack {
					nacked[id] = true
				} else {
					acked[id] = true
				}
				mu.Unlock()
				if nack {
					m.Nack()
					return
				}
				m.Ack()
			})
		}()
	}

	var pubs sync.WaitGroup
	for p := range publishers {
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			pub := c.Publisher(topic)
			pub.EnableMessageOrdering = true
			defer pub.Stop()
			var results []*pubsub.PublishResult
			for i := range perPublisher {
				key := fmt.Sprintf("k%d-%d", p, i%keys)
				results = append(results, pub.Publish(ctx, &pubsub.Message{Data: []byte(strconv.Itoa(i)), OrderingKey: key}))
			}
			for _, r := range results {
				if _, err := r.Get(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	pubs.Wait()
	wait.Until(t, "every message acknowledged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) == publishers*perPublisher
	})
	cancel()
	wg.Wait()
	// A key's messages arrive in the order of publication, but for a
	// redelivery, which starts again at a nacked message.
	for key, ids := range arrivals {
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] && !nacked[ids[i]] {
				t.Errorf("key %s: messages arrived in the order %v, want the order of publication but for redeliveries from a nacked message", key, ids)
				break
			}
		}
	}
}
