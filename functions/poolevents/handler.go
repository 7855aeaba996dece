// Package poolevents serves kubernetesSubstrates-poolEvents, the
// CloudEvent function of the pools module's events (API.md §9), over
// HTTP: the push subscriptions' deliveries are checked for their caller,
// read as the messagePublished CloudEvent the Functions Framework would
// make of them, decoded (shared/input), and recorded (Consumer): what
// each event asks of its pool's substrate (substrates.Desired), in one
// transaction of the store, and a kick of the substrate's chain.
package poolevents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/logging"
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

// Function is the function's Functions Framework name, the
// FUNCTION_TARGET of its Cloud Run service.
const Function = "kubernetesSubstrates-poolEvents"

// Handler is the kubernetesSubstrates-poolEvents function: the
// CloudEvent function of the pools module's events, served over HTTP
// behind the edge, on Cloud Run as in the devstack, so that its caller is
// checked before anything of the request is read. Its one caller is the
// push subscriptions' service account (auth.ServiceAccount): a push
// carries an OIDC token of that account, as infra/ configures the
// subscriptions (push_config.oidc_token).
type Handler struct {
	consumer *Consumer
	auth     httpapi.Authenticator
}

// New returns the handler of the pushes of c's events, whose callers auth
// verifies.
func New(c *Consumer, auth httpapi.Authenticator) (*Handler, error) {
	if c == nil || auth == nil {
		return nil, errors.New("poolevents: New needs a consumer and an authenticator")
	}
	return &Handler{consumer: c, auth: auth}, nil
}

// ServeHTTP takes one delivery of a pool event. The token comes first: no
// token, or one the verifier refuses, is 401, a valid token of anyone but
// the push subscriptions' account 403, and nothing is read or applied.
// Then the body, which is either what a push subscription sends (a JSON
// {"message", "subscription"}, read as the messagePublished CloudEvent
// the Functions Framework would make of it) or that CloudEvent itself, in
// binary or structured mode (the devstack's push, Eventarc's). The answer
// is 200 for an event applied or dropped (Receive), 503 for one to be
// delivered again; Pub/Sub acknowledges any 2xx.
func (p *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if !httpapi.Allow(w, r, http.MethodPost) {
		return
	}
	if _, err := p.auth.Verify(ctx, r.Header.Get("Authorization")); err != nil {
		httpapi.WriteError(ctx, w, err)
		return
	}
	body, ok := httpapi.ReadBody(ctx, w, r)
	if !ok {
		return
	}
	e, err := deliveredEvent(r, body)
	if err != nil {
		// Delivering it again would never help.
		logging.FromContext(ctx).Error("Push that holds no Pub/Sub message dropped", "reason", err.Error())
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "dropped"})
		return
	}
	if err := p.Receive(ctx, *e); err != nil {
		httpapi.WriteError(ctx, w, errs.Wrap(errs.Unavailable, err, "the pool event was not applied; deliver it again"))
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// deliveredEvent is the messagePublished CloudEvent of a push: the
// request's own CloudEvent when it is one, else the one the Functions
// Framework makes of a push subscription's JSON (its ID the message's,
// its source the topic that the push endpoint's path names, or else the
// subscription).
func deliveredEvent(r *http.Request, body []byte) (*event.Event, error) {
	if r.Header.Get("Ce-Id") != "" || strings.HasPrefix(r.Header.Get("Content-Type"), "application/cloudevents") {
		req := r.Clone(r.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		return cehttp.NewEventFromHTTPRequest(req)
	}
	var m MessagePublished
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("not a Pub/Sub push: %w", err)
	}
	if m.Message.MessageID == "" {
		return nil, errors.New("not a Pub/Sub push: no message.messageId")
	}
	source := m.Subscription
	if topic, ok := PushTopic(r.URL.Path); ok {
		source = topic
	}
	e := event.New()
	e.SetID(m.Message.MessageID)
	e.SetType(MessagePublishedType)
	e.SetSource("//pubsub.googleapis.com/" + source)
	if err := e.SetData(event.ApplicationJSON, body); err != nil {
		return nil, err
	}
	return &e, nil
}

// PushTopic is the topic a push endpoint's path names,
// /projects/P/topics/T (infra/ pushes there, as the Functions Framework
// reads it), without the leading slash.
func PushTopic(path string) (string, bool) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[2] != "topics" || parts[1] == "" || parts[3] == "" {
		return "", false
	}
	return strings.TrimPrefix(path, "/"), true
}

// Receive applies one pool event. The pools module publishes its events
// in CloudEvents' binary mode, so the pool event's type is the message's
// ce-type attribute. A message that cannot be read is acknowledged (nil)
// with a logged reason: redelivering it would never help. An error asks
// Pub/Sub to deliver it again (a transient failure); the subscription's
// dead-letter topic bounds that.
func (p *Handler) Receive(ctx context.Context, e event.Event) error {
	log := logging.FromContext(ctx).With("function", Function, "eventId", e.ID())
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
