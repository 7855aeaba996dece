// Package firestore is an in-process emulator of the google.firestore.v1
// Firestore service, faithful enough that the official Go client
// (cloud.google.com/go/firestore) runs against it unchanged, transactions
// included.
//
// Start one with NewServer and connect the client either through the
// environment or with a connection of your own:
//
//	srv, err := firestore.NewServer()
//	...
//	defer srv.Close()
//	t.Setenv("FIRESTORE_EMULATOR_HOST", srv.Addr)
//	client, err := gfs.NewClient(ctx, "test-project")
//
//	// or
//	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
//	client, err := gfs.NewClient(ctx, "test-project", option.WithGRPCConn(conn))
//
// Data is kept per database (projects/P/databases/D), so projects and
// databases are isolated from each other.
//
// What it implements: BatchGetDocuments, ListDocuments (with
// show_missing), ListCollectionIds, RunQuery (every filter operator,
// composite AND/OR filters, orders with Firestore's implicit orders,
// cursors, offset, limit, projections, collection groups),
// vector search, RunAggregationQuery (count with up_to, sum, avg),
// PartitionQuery, Listen, Commit
// (preconditions, update masks, every field transform), BatchWrite,
// BeginTransaction and Rollback: every RPC that the official Go and
// Node.js clients call. GetDocument, CreateDocument, UpdateDocument and
// DeleteDocument, which neither client calls (they read with
// BatchGetDocuments and write with Commit), answer UNIMPLEMENTED. Documents are ordered by name as Firestore orders them: segment
// by segment, numeric IDs (__id<n>__) first by value, then other IDs by
// their UTF-8 bytes. Sum and avg read, as Firestore's index scans do, only
// the documents holding every field they aggregate, in the order of those
// fields, so a limit takes the same documents every time.
// Reads accept a transaction, a new transaction or a read time;
// document versions are kept for an hour so reads at a read time and
// read-only transactions see the state as of that time.
//
// Transactions are serializable. A read-write transaction takes a shared
// lock on the documents it reads (found or missing), as Firestore does:
// readers never wait for one another. Its commit needs the documents it
// writes to itself: a younger transaction holding a lock on one of them is
// aborted (it read what is about to change), an older one is waited for, up
// to 30s (wound-wait). At commit the transaction is also checked: if a
// document it read or the result of a query it ran changed since (through
// a non-transactional write), the commit fails with ABORTED, which makes
// the client retry. A retry (retry_transaction) keeps the age of the first
// attempt.
//
// Faults. Server embeds a faults.Injector, so calls are failed, delayed
// and counted as in every emulator of this repository (package faults says
// how): FailNext fails the next n calls of an RPC with the code and
// message given, SetLatency delays its calls, AddReactor (or the option
// WithReactor) installs any Reactor, and Calls counts the calls. A call
// they answer reads and writes nothing. A streaming call (RunQuery,
// BatchGetDocuments, Listen, ...) meets its faults at its first request
// message. Reset removes them all.
//
// Differences from the real service:
//   - Write and ExecutePipeline are not implemented (UNIMPLEMENTED), so
//     pipelines do not work. Listen serves snapshot listeners by comparing
//     each target's result after every commit: it sends no existence
//     filters, and a resumed target is reset and sent whole.
//   - Vector search (find_nearest) scans the documents; no vector index is
//     needed.
//   - No indexes are needed or checked: every query that Firestore could
//     serve with some index runs, and no query fails for want of an index.
//   - Queries in a transaction take no locks; their results are checked at
//     commit instead. Non-transactional writes never wait for locks; they
//     make the transactions that read the documents abort at commit.
//   - No security rules, authentication, quotas, TTL policies or database
//     administration; any project and database ID is accepted.
//   - Limits enforced: 500 writes per commit, 1 MiB documents (Firestore's
//     size rules), 20 levels of nesting, 30 values in in/not-in/
//     array-contains-any, 5 aggregations per query, reserved IDs and field
//     names.
//   - Read times may go back one hour (no point-in-time recovery).
//   - Explain metrics are synthesized. Without analyze, the answer is the
//     plan alone, as Firestore's: no read time, no documents. The plan
//     names the order-by fields as the index. With analyze, the execution
//     statistics (results returned, read operations, the measured
//     execution duration, and debug statistics with documents_scanned,
//     index_entries_scanned and billing_details, counts as strings) are
//     those of Firestore serving the query from an index that holds
//     exactly its results: a query scans and bills one index entry and one
//     document per result and per document its offset skips; an
//     aggregation scans and bills the index entries it counts, and no
//     document. The emulator itself scans the whole scope.
//   - When sum and avg read several fields and the query does not order by
//     them, the emulator orders by them in field path order, in the
//     direction of the last order; Firestore's order depends on the index
//     it picks. Cursors of an aggregation query apply to the query's own
//     orders.
//   - Error codes follow Firestore. Messages follow Firestore's where
//     clients and users match on them ("No document to update: ",
//     "Document already exists: ", "the stored version (N) does not match
//     the required base version (M)", "maximum number of aggregations",
//     "Aggregations can not be empty.", "Aggregation aliases contain
//     duplicate alias: A.", as other clients' system tests match them);
//     the others are the emulator's own wording. An update_time
//     precondition on a missing document answers NOT_FOUND.
//   - BatchGetDocuments answers in request order (each document once);
//     Firestore answers in any order.
//
// Other official clients' own suites. The Go client's integration suite
// passes every test that applies (46 passed, 4 skipped by the suite under
// an emulator); the two it fails do not apply: QueryDocuments expects
// FAILED_PRECONDITION for a query wanting a composite index (no index is
// needed here, see above), and NewClientWithDatabase expects the client to
// refuse a missing credentials file, which a client of an emulator never
// reads. The Node.js client's system tests (nodejs-firestore v8.3.0 over
// gRPC, scripts/firestore-node-suite.sh) pass: 344 passed, 96 skipped by the
// suite itself (Enterprise-only and upstream-skipped cases). Two of its
// specs are not run: pipeline.js skips every test (pipelines are
// Enterprise-only), and tracing.js cannot pass against any emulator: it
// asserts the production host in its spans, reads them back from Cloud
// Trace with Google credentials, and runs half its cases over REST, which
// this gRPC server does not serve.
package firestore
