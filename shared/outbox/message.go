// Package outbox carries the kubernetes.* CloudEvents (event.Event) from
// the transaction that causes them to Pub/Sub, at least once and never
// lost.
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
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/better-compute/kubernetes/shared/event"
)

// Collection is the name of the outbox collection under each tenant
// (tenants/{t}/outbox/{eventId}); the store keeps it (Store).
const Collection = "outbox"

// Source is the ce-source of the tenant's events.
func Source(tenantID string) string {
	return "//compute.better-compute.dev/tenants/" + tenantID
}

// Message returns e as a Pub/Sub message in CloudEvents binary mode,
// ordered by its cluster.
func Message(e event.Event) *pubsub.Message {
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
