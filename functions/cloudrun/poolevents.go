package cloudrun

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/substrates"
)

// MessagePublished is the data of a google.cloud.pubsub.topic.v1
// .messagePublished CloudEvent: how the Functions Framework hands a
// CloudEvent function the Pub/Sub message that a push subscription
// delivered (converted from the push's JSON), and how Eventarc does.
type MessagePublished struct {
	Message struct {
		Data       []byte            `json:"data"`
		Attributes map[string]string `json:"attributes"`
		MessageID  string            `json:"messageId"`
	} `json:"message"`
	Subscription string `json:"subscription"`
}

// MessagePublishedType is the CloudEvent type of a delivered Pub/Sub
// message.
const MessagePublishedType = "google.cloud.pubsub.topic.v1.messagePublished"

// poolEvents is the kubernetesSubstrates-poolEvents function: a CloudEvent
// function, served over HTTP by the CloudEvents SDK for the devstack and
// registered with the Functions Framework on Cloud Run.
type poolEvents struct {
	consumer *substrates.Consumer
	http     http.Handler
}

func newPoolEvents(ctx context.Context, c *substrates.Consumer) (*poolEvents, error) {
	p := &poolEvents{consumer: c}
	proto, err := cehttp.New()
	if err != nil {
		return nil, fmt.Errorf("cloudevents protocol: %w", err)
	}
	h, err := cloudevents.NewHTTPReceiveHandler(ctx, proto, p.Receive)
	if err != nil {
		return nil, fmt.Errorf("cloudevents handler: %w", err)
	}
	p.http = h
	return p, nil
}

func (p *poolEvents) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.http.ServeHTTP(w, r) }

// Receive applies one pool event. The pools module publishes its events
// in CloudEvents' binary mode, so the pool event's type is the message's
// ce-type attribute. A message that cannot be read is acknowledged (nil)
// with a logged reason: redelivering it would never help. An error asks
// Pub/Sub to deliver it again (a transient failure); the subscription's
// dead-letter topic bounds that.
func (p *poolEvents) Receive(ctx context.Context, e event.Event) error {
	log := logging.FromContext(ctx).With("function", PoolEventsFunction, "eventId", e.ID())
	ctx = logging.NewContext(ctx, log)
	if e.Type() != MessagePublishedType {
		log.Error("Event of an unexpected type dropped", "type", e.Type())
		return nil
	}
	var m MessagePublished
	if err := json.Unmarshal(e.Data(), &m); err != nil {
		log.Error("Pub/Sub message that cannot be read dropped", "reason", err.Error())
		return nil
	}
	typ := m.Message.Attributes["ce-type"]
	log = log.With("messageId", m.Message.MessageID, "poolEventType", typ)
	return p.consumer.Handle(logging.NewContext(ctx, log), typ, m.Message.Data)
}
