// Package outbox carries the kubernetes.* CloudEvents from the transaction
// that causes them to Pub/Sub, at least once and never lost.
//
// An event is written to its tenant's outbox (tenants/{t}/outbox/{id}) in the
// same Firestore transaction as the state change it announces. After the
// commit a Relay publishes it to the topic named after its type and deletes
// the outbox document. A publish that fails leaves the document behind;
// Drain publishes what is pending later, oldest first, under the same ce-id.
//
// Each event also carries its place in its chain (ce-sequence: its
// cluster's, or its substrate's for a substrate event), given by Number in
// the transaction that writes it from the counter on the chain's document
// (SequenceField), so that a consumer can put back in order what several
// instances published, and a redelivery keeps its number.
package outbox

import (
	"encoding/json"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"

	"github.com/better-compute/kubernetes/shared/docpath"
	"github.com/better-compute/kubernetes/shared/resource"
)

// The event types of API.md §7. Each is also the name of its topic.
const (
	NodePoolCreated = "kubernetes.nodepool.created"
	NodePoolReady   = "kubernetes.nodepool.ready"
	NodePoolError   = "kubernetes.nodepool.error"
	NodePoolDeleted = "kubernetes.nodepool.deleted"
	ClusterCreated  = "kubernetes.cluster.created"
	ClusterReady    = "kubernetes.cluster.ready"
	ClusterUpdated  = "kubernetes.cluster.updated"
	ClusterError    = "kubernetes.cluster.error"
	ClusterDeleted  = "kubernetes.cluster.deleted"

	SubstrateReady      = "kubernetes.substrate.ready"
	SubstrateUpdated    = "kubernetes.substrate.updated"
	SubstrateError      = "kubernetes.substrate.error"
	SubstrateDeleted    = "kubernetes.substrate.deleted"
	SubstrateNodeJoined = "kubernetes.substrate.node.joined"
	SubstrateNodeLeft   = "kubernetes.substrate.node.left"
)

// Types lists every event type, for creating the topics.
var Types = []string{
	NodePoolCreated, NodePoolReady, NodePoolError, NodePoolDeleted,
	ClusterCreated, ClusterReady, ClusterUpdated, ClusterError, ClusterDeleted,
	SubstrateReady, SubstrateUpdated, SubstrateError, SubstrateDeleted, SubstrateNodeJoined, SubstrateNodeLeft,
}

// Collection is the name of the outbox collection under each tenant.
const Collection = docpath.OutboxCollection

// Event is a CloudEvent waiting in a tenant's outbox. ID is its ce-id, fixed
// when the event is written so that every publish of it carries the same one.
type Event struct {
	ID         string `firestore:"id"`
	Type       string `firestore:"type"`
	TenantID   string `firestore:"tenantId"`
	ClusterID  string `firestore:"clusterId"`
	NodePoolID string `firestore:"nodePoolId,omitempty"`
	// SubstrateID and PoolID are set on substrate events.
	SubstrateID string    `firestore:"substrateId,omitempty"`
	PoolID      string    `firestore:"poolId,omitempty"`
	Time        time.Time `firestore:"time"`
	Data        []byte    `firestore:"data"` // the resource as the API returns it
	// Sequence is the event's place in its chain (ce-sequence): given by
	// Number in the transaction that writes the event. 0 on an event
	// written before events were numbered, which is published without
	// ce-sequence.
	Sequence int64 `firestore:"sequence,omitempty"`
}

// NodePoolEvent returns an event of type typ about the pool p at time t.
// Its subject is p's cluster.
func NodePoolEvent(typ string, p resource.NodePool, t time.Time) Event {
	p.Normalize()
	return Event{
		ID:         newEventID(),
		Type:       typ,
		TenantID:   p.TenantID,
		ClusterID:  p.ClusterID,
		NodePoolID: p.ID,
		Time:       t.UTC(),
		Data:       mustJSON(p),
	}
}

// ClusterEvent returns an event of type typ about the cluster c at time t.
func ClusterEvent(typ string, c resource.Cluster, t time.Time) Event {
	c.Normalize()
	return Event{
		ID:        newEventID(),
		Type:      typ,
		TenantID:  c.TenantID,
		ClusterID: c.ID,
		Time:      t.UTC(),
		Data:      mustJSON(c),
	}
}

// SubstrateEvent returns an event of type typ about the substrate s at time
// t. Its subject is the substrate's cluster, or the substrate itself while
// it has none.
func SubstrateEvent(typ string, s resource.Substrate, t time.Time) Event {
	return substrateEvent(typ, s, t, s)
}

// SubstrateNodeEvent returns an event of type typ about a node of the
// substrate s at time t.
func SubstrateNodeEvent(typ string, s resource.Substrate, n resource.SubstrateNode, t time.Time) Event {
	n.JoinedAt = n.JoinedAt.UTC()
	return substrateEvent(typ, s, t, n)
}

func substrateEvent(typ string, s resource.Substrate, t time.Time, data any) Event {
	subject := s.ClusterID
	if subject == "" {
		subject = s.ID
	}
	return Event{
		ID:          newEventID(),
		Type:        typ,
		TenantID:    s.TenantID,
		ClusterID:   subject,
		SubstrateID: s.ID,
		PoolID:      s.PoolID,
		Time:        t.UTC(),
		Data:        mustJSON(data),
	}
}

// Ref returns the outbox document of e.
func Ref(fs *firestore.Client, e Event) *firestore.DocumentRef {
	return docpath.Outbox(fs, e.TenantID, e.ID)
}

// Source is the ce-source of the tenant's events.
func Source(tenantID string) string {
	return "//compute.better-compute.dev/tenants/" + tenantID
}

// Message returns e as a Pub/Sub message in CloudEvents binary mode,
// ordered by its cluster.
func (e Event) Message() *pubsub.Message {
	attrs := map[string]string{
		"ce-specversion": "1.0",
		"ce-id":          e.ID,
		"ce-type":        e.Type,
		"ce-source":      Source(e.TenantID),
		"ce-subject":     e.ClusterID,
		"ce-time":        e.Time.UTC().Format(time.RFC3339Nano),
		"content-type":   "application/json",
		"tenantId":       e.TenantID,
		"clusterId":      e.ClusterID,
	}
	if e.NodePoolID != "" {
		attrs["nodePoolId"] = e.NodePoolID
	}
	if e.Sequence > 0 {
		attrs["ce-sequence"] = FormatSequence(e.Sequence)
	}
	if e.SubstrateID != "" {
		attrs["substrateId"] = e.SubstrateID
		attrs["poolId"] = e.PoolID
	}
	return &pubsub.Message{Data: e.Data, Attributes: attrs, OrderingKey: e.ClusterID}
}

func newEventID() string {
	// A TypeID is unique and sorts by creation time, which helps when
	// reading an outbox by hand.
	return resource.NewID("evt")
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// The resources are plain structs of strings, numbers and maps.
		panic(fmt.Sprintf("marshal event data: %v", err))
	}
	return b
}
