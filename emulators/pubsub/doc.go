// Package pubsub is an emulator of Google Cloud Pub/Sub, written from the
// API's own documents (the comments of google/pubsub/v1's pubsub.proto and
// schema.proto, google/iam/v1's iam_policy.proto, and Pub/Sub's public
// documentation). It serves, over gRPC, Pub/Sub's Publisher, Subscriber
// and SchemaService and the IAM policy methods, all in memory:
//
//	srv, err := pubsub.NewServer("127.0.0.1:8085")
//	...
//	defer srv.Close()
//	// PUBSUB_EMULATOR_HOST=srv.Addr, or option.WithEndpoint(srv.Addr)
//
// Server's methods are the gRPC methods, and may be called in process
// too. Messages lists every message published, and OnPublish observes
// them as a viewer of the traffic would, without a subscription. Save and
// Restore copy the whole state (topics, subscriptions with each one's
// backlog, snapshots, schemas, IAM policies) to and from a value ready for
// encoding/json, for a process that restarts; leases are not kept.
//
// # What it serves
//
// Topics: create, get, update (field mask), list, delete, their
// subscriptions and snapshots, detaching a subscription. Names are checked
// as Pub/Sub checks them (3 to 255 characters of letters, digits and
// -._~%+, starting with a letter, not with "goog"). A deleted topic's
// subscriptions and snapshots name the topic _deleted-topic_.
//
// Publish takes up to Pub/Sub's limits: 10 MiB a request (the gRPC server
// takes more, so that a larger request is refused with INVALID_ARGUMENT in
// Pub/Sub's words and not gRPC's RESOURCE_EXHAUSTED, which clients retry),
// 1000 messages, 100 attributes of keys up to 256 bytes and values up to
// 1024, ordering keys up to 1024 bytes; a message with neither data nor
// attributes is refused. Message IDs are decimal numbers, given in the
// order of publication. A topic with a schema checks each message (see
// Schemas below).
//
// Subscriptions: create, get, update, list, delete; ack deadline (10 to 600
// s), message retention (7 days by default, retain_acked_messages), filter
// (attributes.k = "v", !=, attributes:k, hasPrefix, NOT, AND, OR and
// parentheses: a message the filter refuses is never in the backlog, as
// Pub/Sub acknowledges it for the subscriber), dead letter policy (after
// max_delivery_attempts a message goes to the dead letter topic, and
// ReceivedMessage.delivery_attempt counts), message ordering, exactly once
// delivery (an acknowledgement or deadline change of an expired or stale
// ack ID fails with Pub/Sub's ErrorInfo, PERMANENT_FAILURE_INVALID_ACK_ID
// for each), expiration and push configuration kept.
//
// Each subscription has its own backlog. Pull, Acknowledge,
// ModifyAckDeadline and StreamingPull lease its messages: a stream gets,
// in one response, every message available up to the
// MaxOutstandingMessages and MaxOutstandingBytes its client asked for (the
// messages it has not settled count), leased for the stream's ack
// deadline. A subscriber that stops while some are on their way gets them
// again once their lease expires; messages leased to a stream that ends
// before they are sent are available again at once. A stream is woken by
// every publish to its topic and every settlement on its subscription,
// and looks again every pollInterval for expired leases. With message
// ordering, the messages of a key go to one stream at a time, several
// outstanding, in order, within its flow control; when one is nacked or
// its lease expires, it and the later ones of its key that were out are
// delivered again, in order.
//
// Snapshots: create (the subscription's unacknowledged messages, and
// everything published to the topic afterwards), list and delete (get,
// update and a topic's list of snapshots, which no one calls, answer
// UNIMPLEMENTED); a snapshot expires 7 days after the publication of
// the oldest message it holds (7 days after its creation if none), as
// Pub/Sub documents. Seek to a snapshot makes unacknowledged exactly what
// the snapshot holds; seek to a time, the messages published at or after
// it that are retained (by the subscription, its topic's retention, or a
// snapshot of the topic), and acknowledges those before it. Leases end at
// a seek, and ack IDs delivered before it settle nothing.
//
// Schemas: create, get, list (views: BASIC omits the definition; get's
// default is FULL, the lists' BASIC, as the proto says), delete and
// ValidateSchema, which the Node.js client's system tests call. What no
// one calls is not served (emulators/README.md): revisions (commit,
// rollback, list, delete a revision) and ValidateMessage answer
// UNIMPLEMENTED, and a topic bound to a schema (schema_settings) is
// refused with UNIMPLEMENTED, since nothing would check its publications.
//
// IAM: GetIamPolicy, SetIamPolicy and TestIamPermissions on topics,
// subscriptions, snapshots and schemas keep a policy per resource, with an
// etag that changes at each SetIamPolicy (a stale etag is ABORTED), and
// answer NOT_FOUND for a missing resource. They enforce nothing: whoever
// the emulator serves may do everything, so TestIamPermissions grants
// every permission asked for.
//
// Faults: Server embeds a faults.Injector, so tests fail, delay and count
// the calls that arrive over gRPC (WithReactor, FailNext, ...; see
// emulators/faults). In-process calls of Server's methods are not offered
// to it.
//
// # Known differences from Pub/Sub
//
//   - Nothing is pushed: a subscription's push configuration (set at its
//     creation or by UpdateSubscription; ModifyPushConfig, which no one
//     calls, is not served) is kept, and its messages wait to be
//     pulled. BigQuery and Cloud Storage subscriptions,
//     ingestion settings and message transforms are kept and not applied.
//     (What uses this emulator pulls, and pushing needs a reachable
//     endpoint and a token service.)
//   - The retry policy is kept and not applied: a nacked message is
//     available again at once.
//   - A subscription never expires, whatever its expiration policy.
//   - Schemas: a schema has one revision, the one it was created with;
//     topics cannot be bound to one, and no message is checked against
//     one (above). An Avro definition is parsed and checked as a schema;
//     a Protocol Buffer definition is checked for one top-level message
//     and balanced braces only, without a compiler.
//   - Seek to a time reaches back only to what this subscription received
//     since its creation, unless a snapshot of the topic retains more; on
//     Pub/Sub, a topic's message retention reaches back to before the
//     subscription's creation.
//   - A snapshot keeps everything published to its topic until it
//     expires, in memory.
//   - Exactly once delivery: acknowledgements sent on a stream are applied
//     but not confirmed in the stream's responses (the Go client sends
//     them with Acknowledge when exactly once is on).
//   - A message is delivered no sooner than deliveryDelay (20 ms) after
//     its publication: on Pub/Sub delivery takes longer than the answer
//     to the publisher, and clients rely on it (the Node.js client's seek
//     tests wait for the message whose ID their publish returned, and let
//     by one that comes before the ID).
//   - Messages keeps every message published since the server started,
//     whatever was acknowledged; it is for tests.
//   - Limits that Pub/Sub enforces per project (quotas, throughput) are not
//     enforced; error texts follow Pub/Sub's where they are public, and are
//     this package's own otherwise.
//
// The Node.js client's system tests (googleapis/nodejs-pubsub v5.3.0,
// system-test/pubsub.ts, run by scripts/pubsub-node-suite.sh): 44 passed,
// 0 failed, 1 skipped by the suite itself. No failure is left.
package pubsub
