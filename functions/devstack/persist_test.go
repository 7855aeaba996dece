package devstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// TestDataFile starts a stack with a data file, makes a cluster, and
// copies the data file as the stack saved it on its own, without Close:
// what a kill -9 would leave. A stack started from the copy, on the same
// address, has the cluster, at the provider too, takes the first stack's
// token, keeps its subscription, and delivers the message no subscriber
// had acknowledged.
func TestDataFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := fastConfig()
	cfg.DataFile = filepath.Join(dir, "data.json")
	e := startEnv(t, cfg)
	ctx := context.Background()
	sub := "projects/bc-dev/subscriptions/keep"
	if _, err := e.PubSub.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: "projects/bc-dev/topics/" + event.ClusterCreated, AckDeadlineSeconds: 10}); err != nil {
		t.Fatalf("create subscription: %v", err)
	}
	cl := e.api.createCluster(t, "keep", poolSpec("a", 1))
	e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	e.waitEvents(t, cl.ID, map[string]int{event.ClusterReady: 1})

	// The stack saves within a second, without being asked.
	var saved []byte
	wait.For(t, "the data file with the cluster at GKE and the subscription", func() (bool, string) {
		b, err := os.ReadFile(cfg.DataFile)
		if err != nil {
			return false, err.Error()
		}
		var d struct {
			GKE    json.RawMessage
			PubSub json.RawMessage
		}
		if err := json.Unmarshal(b, &d); err != nil {
			return false, err.Error()
		}
		saved = b
		return bytes.Contains(d.GKE, []byte(cl.ProviderName)) && bytes.Contains(d.PubSub, []byte(sub)), "not yet"
	})
	copyFile := filepath.Join(dir, "killed.json")
	if err := os.WriteFile(copyFile, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(e.URL, "http://")
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	cfg2 := fastConfig()
	cfg2.DataFile, cfg2.Addr = copyFile, addr
	s2, err := devstack.Start(ctx, cfg2)
	if err != nil {
		t.Fatalf("Start from the data file: %v", err)
	}
	t.Cleanup(func() { s2.Close() })
	api := &client{url: s2.URL, token: e.api.token}
	if _, err := api.getCluster(cl.ID); err != nil {
		t.Fatalf("get the cluster with the first stack's token: %v", err)
	}
	api.waitCluster(t, cl.ID, resource.StateReady, nil)
	if _, err := s2.GKE.Cluster(providerName(cl)); err != nil {
		t.Errorf("GKE cluster after the restart: %v", err)
	}
	resp, err := s2.PubSub.Pull(ctx, &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 10})
	if err != nil {
		t.Fatalf("pull the kept subscription: %v", err)
	}
	var ids []string
	for _, m := range resp.ReceivedMessages {
		ids = append(ids, m.Message.Attributes["clusterId"])
	}
	if len(ids) == 0 || ids[0] != cl.ID {
		t.Errorf("messages of the kept subscription = clusters %v, want the cluster.created of %s", ids, cl.ID)
	}

	// It goes on: the cluster can be deleted, at the provider too.
	api.deleteCluster(t, cl.ID)
	wait.For(t, "cluster gone at the provider", func() (bool, string) {
		_, err := s2.GKE.Cluster(providerName(cl))
		return err != nil, api.clusterState(cl.ID)
	})
}

// TestDataFileRefused starts a stack on a data file it cannot read: the
// start fails, saying so, and leaves the file as it was.
func TestDataFileRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"empty":  "",
		"torn":   `{"version":1,"gke":{"version":1,"clusters":[`,
		"future": `{"version":99}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".json")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := fastConfig()
			cfg.DataFile = path
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := devstack.Start(ctx, cfg)
			if err == nil {
				s.Close()
				t.Fatalf("Start on a %s data file = nil error, want one", name)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("Start error = %q, want it to name %s", err, path)
			}
			if b, _ := os.ReadFile(path); string(b) != content {
				t.Errorf("data file after the refused start = %q, want it untouched", b)
			}
		})
	}
}

// TestDataFileDeletedTopic restarts a stack whose data file has a
// subscription, and an unacknowledged message, of a topic deleted since:
// they are left out.
func TestDataFileDeletedTopic(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.DataFile = filepath.Join(t.TempDir(), "data.json")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := devstack.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	g := s.PubSub
	topic, sub := "projects/bc-dev/topics/gone", "projects/bc-dev/subscriptions/orphan"
	if _, err := g.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Publish(ctx, &pubsubpb.PublishRequest{Topic: topic, Messages: []*pubsubpb.PubsubMessage{{Data: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.DeleteTopic(ctx, &pubsubpb.DeleteTopicRequest{Topic: topic}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s2, err := devstack.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start from a data file with a subscription of a deleted topic: %v", err)
	}
	s2.Close()
}
