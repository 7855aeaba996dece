// Package poolevents serves kubernetesSubstrates-poolEvents, the
// CloudEvent function of the pools module's events (API.md §9), over
// HTTP: the push subscriptions' deliveries are checked for their caller,
// read once as the messagePublished data the Functions Framework would
// hand over, decoded (shared/input), and recorded (Consumer): what each
// event asks of its pool's substrate, decided by lifecycle's rules
// (DecidePoolEvent) in one transaction of the store, and a kick of the
// substrate's chain.
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
// Then the body, read once, which is either what a push subscription
// sends (a JSON {"message", "subscription"}: the data of the
// messagePublished CloudEvent the Functions Framework would make of it)
// or that CloudEvent itself, in binary or structured mode (the devstack's
// push, Eventarc's). The answer
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
	if isCloudEvent(r) {
		// Eventarc's, or the devstack's: the CloudEvent is the request.
		req := r.Clone(ctx)
		req.Body = io.NopCloser(bytes.NewReader(body))
		e, err := cehttp.NewEventFromHTTPRequest(req)
		if err != nil {
			drop(ctx, w, err)
			return
		}
		p.answer(ctx, w, p.Receive(ctx, *e))
		return
	}
	// A push subscription's JSON, read once: it is the data of the
	// messagePublished CloudEvent the Functions Framework would make of
	// it, whose ID is the message's.
	m, err := pushed(body)
	if err != nil {
		drop(ctx, w, err)
		return
	}
	p.answer(ctx, w, p.handle(ctx, m.Message.MessageID, m))
}

// answer writes the answer to a delivery that err says was applied or
// dropped (nil), or is to be delivered again.
func (p *Handler) answer(ctx context.Context, w http.ResponseWriter, err error) {
	if err != nil {
		httpapi.WriteError(ctx, w, errs.Wrap(errs.Unavailable, err, "the pool event was not applied; deliver it again"))
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// drop answers a push that holds no Pub/Sub message: delivering it again
// would never help.
func drop(ctx context.Context, w http.ResponseWriter, err error) {
	logging.FromContext(ctx).Error("Push that holds no Pub/Sub message dropped", "reason", err.Error())
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "dropped"})
}

// isCloudEvent reports whether the request is a CloudEvent, in binary or
// structured mode, rather than a push subscription's JSON.
func isCloudEvent(r *http.Request) bool {
	return r.Header.Get("Ce-Id") != "" || strings.HasPrefix(r.Header.Get("Content-Type"), "application/cloudevents")
}

// pushed decodes a push subscription's JSON {"message", "subscription"}.
func pushed(body []byte) (*MessagePublished, error) {
	var m MessagePublished
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("not a Pub/Sub push: %w", err)
	}
	if m.Message.MessageID == "" {
		return nil, errors.New("not a Pub/Sub push: no message.messageId")
	}
	return &m, nil
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
	if e.Type() != MessagePublishedType {
		logging.FromContext(ctx).Error("Event of an unexpected type dropped", "function", Function, "eventId", e.ID(), "type", e.Type())
		return nil
	}
	var m MessagePublished
	if err := json.Unmarshal(e.Data(), &m); err != nil {
		logging.FromContext(ctx).Error("Pub/Sub message that cannot be read dropped", "function", Function, "eventId", e.ID(), "reason", err.Error())
		return nil
	}
	return p.handle(ctx, e.ID(), &m)
}

// handle applies the pool event of the Pub/Sub message m, delivered as
// the event eventID.
func (p *Handler) handle(ctx context.Context, eventID string, m *MessagePublished) error {
	log := logging.FromContext(ctx).With("function", Function, "eventId", eventID)
	typ := m.Message.Attributes["ce-type"]
	log = log.With("messageId", m.Message.MessageID, "poolEventType", typ)
	return p.consumer.Handle(logging.NewContext(ctx, log), typ, m.Message.Data)
}
