package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/spf13/cobra"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"sigs.k8s.io/yaml"

	"github.com/better-compute/kubernetes/shared/client"
	"github.com/better-compute/kubernetes/shared/event"
)

func (a *app) eventsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "Follow the kubernetes.* CloudEvents"}
	cmd.AddCommand(a.eventsTail())
	return cmd
}

// printedEvent is one CloudEvent as tail prints it.
type printedEvent struct {
	Attributes map[string]string `json:"attributes"`
	Data       json.RawMessage   `json:"data"`
}

func (a *app) eventsTail() *cobra.Command {
	var (
		clusterID, project, emulator string
		types                        []string
		limit                        int
		orderWait                    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "tail [--cluster CLUSTER_ID] [--type TYPE]...",
		Short: "Print the events as they arrive from Pub/Sub, until interrupted",
		Long: "Subscribes to every event topic (one per type, API.md §7) with subscriptions of its own,\n" +
			"removed when it stops, and prints each event as it arrives: a line in a table, or with\n" +
			"--output json one JSON object per line ({\"attributes\": {...}, \"data\": {...}}).\n" +
			"Against the devstack (bc login --dev) it uses its Pub/Sub emulator; otherwise Google Cloud\n" +
			"Pub/Sub with the application default credentials, in --project.\n" +
			"Events come in the order of their ce-sequence, cluster by cluster (substrate by substrate\n" +
			"for a substrate's), each once: an event is held until its predecessor came, for at most\n" +
			"--order-wait, and a gap that persists is noted on stderr. The first event seen of a\n" +
			"cluster waits too, in case an earlier one is on its way. With --type, the sequence has\n" +
			"the other types' numbers missing: events are printed as they arrive, each once.",
		Example: "  bc events tail --cluster kcl_...\n  bc events tail --type kubernetes.nodepool.error -o json | jq .data.message",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if project == "" {
				project = a.cfg.Project
			}
			if project == "" {
				return &usageError{errors.New("no project: give --project or run bc config set project NAME")}
			}
			if emulator == "" {
				emulator = a.cfg.PubSubEmulatorHost
			}
			if v, ok := a.lookup("PUBSUB_EMULATOR_HOST"); ok && v != "" && !cmd.Flags().Changed("pubsub-emulator") {
				emulator = v
			}
			topics := event.Types
			if len(types) > 0 {
				for _, t := range types {
					if !contains(event.Types, t) {
						return &usageError{fmt.Errorf("--type %q: want one of %s", t, strings.Join(event.Types, ", "))}
					}
				}
				topics = types
			}
			if orderWait < 0 {
				return &usageError{fmt.Errorf("--order-wait %v: want 0 or more", orderWait)}
			}
			if len(types) > 0 {
				orderWait = 0 // the other types' events leave gaps that never fill
			}
			return a.tail(project, emulator, clusterID, topics, limit, orderWait)
		},
	}
	f := cmd.Flags()
	f.StringVar(&clusterID, "cluster", "", "only the events of this cluster (and its node pools, and its substrate's)")
	f.StringArrayVar(&types, "type", nil, "only events of this type (repeat for more)")
	f.StringVar(&project, "project", "", "the Google Cloud project of the topics (config: project)")
	f.StringVar(&emulator, "pubsub-emulator", "", "host:port of a Pub/Sub emulator (PUBSUB_EMULATOR_HOST; config: pubsubEmulatorHost)")
	f.IntVar(&limit, "limit", 0, "stop after this many events (0: until interrupted)")
	f.DurationVar(&orderWait, "order-wait", defaultOrderWait, "how long an event waits for its predecessor before it is printed past the gap (0: print events as they arrive)")
	return cmd
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// defaultOrderWait is how long tail holds an event for its predecessor:
// events published by different instances at about the same time come
// within a few seconds of each other.
const defaultOrderWait = 5 * time.Second

// tail subscribes to the topics and prints what arrives, in order
// (client.Orderer; as it arrives when orderWait is 0), each once, until
// a.ctx ends or limit events were printed.
func (a *app) tail(project, emulator, clusterID string, topics []string, limit int, orderWait time.Duration) error {
	ctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	var opts []option.ClientOption
	if emulator != "" {
		opts = []option.ClientOption{option.WithEndpoint(emulator), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials()))}
	}
	ps, err := pubsub.NewClient(ctx, project, opts...)
	if err != nil {
		return fmt.Errorf("pubsub: %w", err)
	}
	defer ps.Close()

	suffix := randomSuffix()
	var subs []string
	defer func() {
		// Remove the subscriptions even when interrupted.
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		for _, s := range subs {
			_ = ps.SubscriptionAdminClient.DeleteSubscription(dctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: s})
		}
	}()
	filter := ""
	if clusterID != "" {
		filter = fmt.Sprintf("attributes.clusterId = %q", clusterID)
	}
	for _, t := range topics {
		name := fmt.Sprintf("projects/%s/subscriptions/bc-tail-%s-%s", project, suffix, strings.ReplaceAll(t, ".", "-"))
		_, err := ps.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: name, Topic: fmt.Sprintf("projects/%s/topics/%s", project, t), Filter: filter,
			AckDeadlineSeconds: 10,
			// Left behind by a killed bc, it goes away by itself.
			ExpirationPolicy: &pubsubpb.ExpirationPolicy{Ttl: durationpb.New(24 * time.Hour)},
		})
		if err != nil {
			return fmt.Errorf("subscribe to %s: %w", t, err)
		}
		subs = append(subs, name)
	}
	where := "Google Cloud Pub/Sub"
	if emulator != "" {
		where = "the Pub/Sub emulator at " + emulator
	}
	fmt.Fprintf(a.stderr, "Listening for %d event types on %s, project %s (Ctrl-C to stop)...\n", len(topics), where, project)

	var (
		mu      sync.Mutex
		printed int
		header  bool
		ord     = client.NewOrderer(orderWait, 0)
		seen    = map[string]bool{} // ce-ids, when not ordering
	)
	// emit prints what the orderer handed on; mu is held, so that the
	// order it handed them on is the order printed.
	emit := func(events []client.Event, gaps []client.Gap) {
		for _, g := range gaps {
			fmt.Fprintf(a.stderr, "Note: %s.\n", g)
		}
		for _, e := range events {
			if limit > 0 && printed >= limit {
				return
			}
			if !header && a.output == "table" {
				fmt.Fprintln(a.stdout, "TIME          TYPE                          CLUSTER                         NODE POOL                       STATE      DETAIL")
				header = true
			}
			a.printEvent(printedEvent{Attributes: e.Attributes, Data: e.Data})
			printed++
			if limit > 0 && printed >= limit {
				cancel()
			}
		}
	}
	receive := func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		mu.Lock()
		defer mu.Unlock()
		e := client.Event{Attributes: m.Attributes, Data: m.Data}
		if orderWait == 0 {
			id := m.Attributes["ce-id"]
			if !seen[id] {
				seen[id] = true
				emit([]client.Event{e}, nil)
			}
			return
		}
		emit(ord.Add(e, time.Now()))
	}
	go func() {
		// Held events whose wait is over go out even when nothing
		// else arrives.
		if orderWait == 0 {
			return
		}
		t := time.NewTicker(max(orderWait/10, 50*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				mu.Lock()
				emit(ord.Flush(now))
				mu.Unlock()
			}
		}
	}()
	errc := make(chan error, len(subs))
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- ps.Subscriber(s).Receive(ctx, receive)
		}()
	}
	wg.Wait()
	mu.Lock()
	emit(ord.Close()) // stopping: what is held is printed, past its gaps
	mu.Unlock()
	close(errc)
	for err := range errc {
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("receive: %w", err)
		}
	}
	return nil
}

// printEvent writes one event in the output format.
func (a *app) printEvent(e printedEvent) {
	switch a.output {
	case "json":
		b, _ := json.Marshal(e)
		fmt.Fprintf(a.stdout, "%s\n", b)
		return
	case "yaml":
		b, _ := json.Marshal(e)
		y, _ := yaml.JSONToYAML(b)
		fmt.Fprintf(a.stdout, "---\n%s", y)
		return
	}
	var data struct {
		Name    string `json:"name"`
		State   string `json:"state"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(e.Data, &data)
	at := e.Attributes["ce-time"]
	if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
		at = t.Local().Format("15:04:05.000")
	}
	detail := "name=" + data.Name
	if sub := e.Attributes["substrateId"]; sub != "" {
		// A substrate has no name; a node event's data is the node.
		detail = "substrate=" + sub + " pool=" + e.Attributes["poolId"]
		if data.Name != "" {
			detail += " node=" + data.Name
		}
	}
	if data.Message != "" {
		detail += " message=" + fmt.Sprintf("%q", data.Message)
	}
	fmt.Fprintf(a.stdout, "%-13s %-29s %-31s %-31s %-10s %s\n", at, e.Attributes["ce-type"],
		e.Attributes["clusterId"], orDash(e.Attributes["nodePoolId"]), data.State, detail)
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
