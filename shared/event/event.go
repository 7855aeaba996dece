// Package event holds the CloudEvents of this project (API.md §7 and §9):
// the types of the kubernetes.* events it produces and of the pools
// module's events it consumes, and Event, the value a change of state
// makes.
//
// An Event is the domain's: lifecycle's transitions and the store's
// transactions return it, and the outbox (shared/outbox) relays it to
// Pub/Sub. It is a plain value, so that the code that decides a change
// needs nothing of the code that publishes it.
package event

import (
	"encoding/json"
	"fmt"
	"time"

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

// Types lists every event type this project produces, for creating the
// topics.
var Types = []string{
	NodePoolCreated, NodePoolReady, NodePoolError, NodePoolDeleted,
	ClusterCreated, ClusterReady, ClusterUpdated, ClusterError, ClusterDeleted,
	SubstrateReady, SubstrateUpdated, SubstrateError, SubstrateDeleted, SubstrateNodeJoined, SubstrateNodeLeft,
}

// The types of the pools module's events that this project consumes
// (API.md §9).
const (
	PoolUpdated  = "compute.pool.updated"
	PoolArchived = "compute.pool.archived"
)

// Consumed lists the types of the events this project consumes.
var Consumed = []string{PoolUpdated, PoolArchived}

// Event is a CloudEvent of a change, as the transaction that makes the
// change writes it. ID is its ce-id, fixed when the event is made so that
// every publish of it carries the same one.
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
	// Sequence is the event's place in its chain (ce-sequence), given in
	// the transaction that writes the event (outbox.Number). 0 on an
	// event written before events were numbered, which is published
	// without ce-sequence.
	Sequence int64 `firestore:"sequence,omitempty"`
}

// ForNodePool returns an event of type typ about the pool p at time t.
// Its subject is p's cluster.
func ForNodePool(typ string, p resource.NodePool, t time.Time) Event {
	p.Normalize()
	return Event{
		ID:         newID(),
		Type:       typ,
		TenantID:   p.TenantID,
		ClusterID:  p.ClusterID,
		NodePoolID: p.ID,
		Time:       t.UTC(),
		Data:       mustJSON(p),
	}
}

// ForCluster returns an event of type typ about the cluster c at time t.
func ForCluster(typ string, c resource.Cluster, t time.Time) Event {
	c.Normalize()
	return Event{
		ID:        newID(),
		Type:      typ,
		TenantID:  c.TenantID,
		ClusterID: c.ID,
		Time:      t.UTC(),
		Data:      mustJSON(c),
	}
}

// ForSubstrate returns an event of type typ about the substrate s at time
// t. Its subject is the substrate's cluster, or the substrate itself
// while it has none.
func ForSubstrate(typ string, s resource.Substrate, t time.Time) Event {
	return forSubstrate(typ, s, t, s)
}

// ForSubstrateNode returns an event of type typ about a node of the
// substrate s at time t.
func ForSubstrateNode(typ string, s resource.Substrate, n resource.SubstrateNode, t time.Time) Event {
	n.JoinedAt = n.JoinedAt.UTC()
	return forSubstrate(typ, s, t, n)
}

func forSubstrate(typ string, s resource.Substrate, t time.Time, data any) Event {
	subject := s.ClusterID
	if subject == "" {
		subject = s.ID
	}
	return Event{
		ID:          newID(),
		Type:        typ,
		TenantID:    s.TenantID,
		ClusterID:   subject,
		SubstrateID: s.ID,
		PoolID:      s.PoolID,
		Time:        t.UTC(),
		Data:        mustJSON(data),
	}
}

func newID() string {
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
