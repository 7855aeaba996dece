package apidoc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"sync"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
)

// Example_consumer is the example consumer of this package's README.md:
// it prints every kubernetes.nodepool.ready event of the devstack as it
// arrives (run with PUBSUB_EMULATOR_HOST=127.0.0.1:8085). Compiled by go
// test, not run.
func Example_consumer() {
	ctx := context.Background()
	ps, err := pubsub.NewClient(ctx, "bc-dev") // PUBSUB_EMULATOR_HOST points it at the devstack
	if err != nil {
		log.Fatal(err)
	}
	defer ps.Close()
	sub := "projects/bc-dev/subscriptions/my-consumer"
	_, err = ps.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name:  sub,
		Topic: "projects/bc-dev/topics/kubernetes.nodepool.ready", // one topic per event type
	})
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex         // Receive calls the function concurrently
	seen := map[string]bool{} // delivery is at least once: a redelivery keeps its place
	err = ps.Subscriber(sub).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		defer m.Ack()
		key := m.Attributes["clusterId"] + "/" + m.Attributes["ce-sequence"] // in its cluster's sequence
		mu.Lock()
		dup := seen[key]
		seen[key] = true
		mu.Unlock()
		if dup {
			return
		}
		var pool struct { // the node pool as the API returns it (asyncapi.json)
			Name      string `json:"name"`
			NodeCount int    `json:"nodeCount"`
		}
		if err := json.Unmarshal(m.Data, &pool); err != nil {
			log.Printf("event %s: %v", m.Attributes["ce-id"], err)
			return
		}
		fmt.Printf("cluster %s: node pool %s ready with %d nodes per zone\n",
			m.Attributes["clusterId"], pool.Name, pool.NodeCount)
	})
	if err != nil {
		log.Fatal(err)
	}
}
