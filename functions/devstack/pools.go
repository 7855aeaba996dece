package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/functions/cloudrun"
	"github.com/better-compute/kubernetes/functions/poolevents"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/resource"
)

// The pools module's events reach the stack as they reach the project in
// production: published on their topics, delivered by a subscription per
// topic to kubernetesSubstrates-poolEvents. The devstack plays the pools
// module (POST /dev/pools/put and /dev/pools/archive publish its events)
// and the push subscriptions, which the emulator does not push: a subscriber
// pulls each subscription and posts every message to the function, over
// HTTP, as the CloudEvent the Functions Framework makes of a push, with
// the OIDC token a push subscription sends (PushServiceAccount's), and
// acknowledges it when the function answers 2xx (a failure is delivered
// again, as Pub/Sub would).

// poolTopics are the topics of the pools module's events, with the
// function's subscriptions.
var poolTopics = func() []string {
	for _, f := range cloudrun.Functions() {
		if f.Name == cloudrun.PoolEventsFunction {
			return f.Topics
		}
	}
	panic("devstack: no " + cloudrun.PoolEventsFunction)
}()

func poolSubscription(project, topic string) string {
	return fmt.Sprintf("projects/%s/subscriptions/%s-%s", project, cloudrun.PoolEventsFunction, topic)
}

// provisionPools creates the pool topics and the function's subscriptions.
func (s *Stack) provisionPools(ctx context.Context, ps *pubsub.Client) error {
	for _, t := range poolTopics {
		topic := fmt.Sprintf("projects/%s/topics/%s", s.cfg.Project, t)
		if _, err := ps.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil && status.Code(err) != codes.AlreadyExists {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
		sub := &pubsubpb.Subscription{Name: poolSubscription(s.cfg.Project, t), Topic: topic, AckDeadlineSeconds: 60}
		if _, err := ps.SubscriptionAdminClient.CreateSubscription(ctx, sub); err != nil && status.Code(err) != codes.AlreadyExists {
			return fmt.Errorf("create subscription %s: %w", sub.Name, err)
		}
	}
	return nil
}

// deliverPools pulls the pool subscriptions and posts each message to the
// consumer function, until ctx ends.
func (s *Stack) deliverPools(ctx context.Context) {
	defer s.wg.Done()
	url := s.URL + functionPath(cloudrun.PoolEventsFunction)
	done := make(chan struct{}, len(poolTopics))
	for _, t := range poolTopics {
		name := poolSubscription(s.cfg.Project, t)
		go func() {
			defer func() { done <- struct{}{} }()
			sub := s.PubSubClient.Subscriber(name)
			sub.ReceiveSettings.MaxOutstandingMessages = 8
			for ctx.Err() == nil {
				err := sub.Receive(ctx, func(ctx context.Context, m *pubsub.Message) {
					if err := s.push(ctx, url, name, m); err != nil {
						s.log.Warn("Pool event delivery failed; Pub/Sub delivers it again", "subscription", name, "messageId", m.ID, "error", err)
						m.Nack()
						return
					}
					m.Ack()
				})
				if err != nil && ctx.Err() == nil {
					s.log.Warn("Pool subscription pull failed; pulling again", "subscription", name, "error", err)
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
			}
		}()
	}
	for range poolTopics {
		<-done
	}
}

// push posts m to the function as the CloudEvent of a delivered message
// (binary mode), with an OIDC token of the subscriptions' identity, as a
// push subscription with an oidc_token sends (infra/), the one caller
// the function accepts.
func (s *Stack) push(ctx context.Context, url, subscription string, m *pubsub.Message) error {
	tok, err := s.Issuer.ServiceAccountToken(s.functions.PushServiceAccount, s.functions.PushAudience, callerTokenLifetime)
	if err != nil {
		return err
	}
	var data poolevents.MessagePublished
	data.Message.Data, data.Message.Attributes, data.Message.MessageID = m.Data, m.Attributes, m.ID
	data.Subscription = subscription
	body, err := json.Marshal(data)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("ce-specversion", "1.0")
	req.Header.Set("ce-type", poolevents.MessagePublishedType)
	req.Header.Set("ce-source", "//pubsub.googleapis.com/"+subscription)
	req.Header.Set("ce-id", m.ID)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return nil
}

// Pools module paths of the devstack (API.md §8).
const (
	PoolsPutPath     = "/dev/pools/put"
	PoolsArchivePath = "/dev/pools/archive"
)

// poolsHandler publishes the body as a pool event of type typ, as the
// pools module would: CloudEvents binary mode, ce-subject the pool.
func (s *Stack) poolsHandler(typ string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		body, ok := httpapi.ReadBody(ctx, w, r)
		if !ok {
			return
		}
		// Only JSON is checked: what the pool says is for the consumer
		// to judge, so that malformed events can be tried too.
		var head map[string]json.RawMessage
		if err := httpapi.DecodeJSON(body, &head); err != nil {
			httpapi.WriteError(ctx, w, err)
			return
		}
		var id, tenant string
		_ = json.Unmarshal(head["id"], &id)
		_ = json.Unmarshal(head["tenantId"], &tenant)
		attrs := map[string]string{
			"ce-specversion": "1.0",
			"ce-id":          resource.NewID("evt"),
			"ce-type":        typ,
			"ce-source":      "//compute.better-compute.dev/tenants/" + tenant,
			"ce-subject":     id,
			"ce-time":        time.Now().UTC().Format(time.RFC3339Nano),
			"content-type":   "application/json",
			"tenantId":       tenant,
		}
		topic := fmt.Sprintf("projects/%s/topics/%s", s.cfg.Project, typ)
		res := s.PubSubClient.Publisher(topic).Publish(ctx, &pubsub.Message{Data: body, Attributes: attrs})
		msgID, err := res.Get(ctx)
		if err != nil {
			httpapi.WriteError(ctx, w, errs.Wrap(errs.Unavailable, err, "publish the pool event"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]string{"messageId": msgID})
	}
}
