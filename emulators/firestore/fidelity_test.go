package firestore

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	gfs "cloud.google.com/go/firestore"
	apiv1 "cloud.google.com/go/firestore/apiv1"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// relPaths returns the document paths below the database root, sorted.
func relPaths(snaps []*gfs.DocumentSnapshot) []string {
	out := make([]string, len(snaps))
	for i, s := range snaps {
		out[i] = s.Ref.Path[strings.Index(s.Ref.Path, "/documents/")+len("/documents/"):]
	}
	slices.Sort(out)
	return out
}

func setDocs(t *testing.T, c *gfs.Client, docs map[string]map[string]any) {
	t.Helper()
	ctx := testCtx(t)
	for path, data := range docs {
		if _, err := c.Doc(path).Set(ctx, data); err != nil {
			t.Fatalf("Set(%s): %v", path, err)
		}
	}
}

// TestListenScopedToQuery checks that a listener sees exactly what the same
// query returns, both at first and after writes in and out of its scope.
func TestListenScopedToQuery(t *testing.T) {
	_, c := newTestServer(t)
	setDocs(t, c, map[string]map[string]any{
		"A/a1":            {"n": 1},
		"A/a2":            {"n": 2},
		"A/a3":            {"n": 3},
		"B/b1":            {"n": 1},
		"A/a1/sub/s1":     {"n": 1},
		"B/b1/sub/s2":     {"n": 5},
		"A/a1/other/o1":   {"n": 1},
		"Asub/x/sub/deep": {"n": 7},
	})
	for _, tc := range []struct {
		desc    string
		q       gfs.Query
		in, out string // a write inside the query's scope and one outside
	}{
		{"collection", c.Collection("A").Query, "A/a4", "B/b2"},
		{"collection ignores subcollections", c.Collection("A").Query, "A/a5", "A/a2/sub/s9"},
		{"subcollection", c.Collection("A/a1/sub").Query, "A/a1/sub/s3", "A/a2/sub/s3"},
		{"collection group", c.CollectionGroup("sub").Query, "C/c1/sub/s4", "C/c1/other/o4"},
		{"filter order limit", c.Collection("A").Where("n", ">=", 2).OrderBy("n", gfs.Desc).Limit(2), "A/top", "B/top"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := testCtx(t)
			it := tc.q.Snapshots(ctx)
			t.Cleanup(it.Stop)
			snap, err := it.Next()
			if err != nil {
				t.Fatalf("first snapshot: %v", err)
			}
			checkSameAsQuery(t, ctx, tc.q, relPaths(mustDocs(t, snap)))
			// The write outside comes first: if it reached the listener, the
			// snapshot that shows the write inside would include it.
			setDocs(t, c, map[string]map[string]any{tc.out: {"n": 100}})
			setDocs(t, c, map[string]map[string]any{tc.in: {"n": 100}})
			for {
				snap, err = it.Next()
				if err != nil {
					t.Fatalf("waiting for %s: %v", tc.in, err)
				}
				if got := relPaths(mustDocs(t, snap)); slices.Contains(got, tc.in) {
					checkSameAsQuery(t, ctx, tc.q, got)
					break
				}
			}
		})
	}
}

func mustDocs(t *testing.T, snap *gfs.QuerySnapshot) []*gfs.DocumentSnapshot {
	t.Helper()
	docs, err := snap.Documents.GetAll()
	if err != nil {
		t.Fatalf("snapshot documents: %v", err)
	}
	return docs
}

func checkSameAsQuery(t *testing.T, ctx context.Context, q gfs.Query, got []string) {
	t.Helper()
	want, err := q.Documents(ctx).GetAll()
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	if w := relPaths(want); !slices.Equal(got, w) {
		t.Errorf("listener sees %v, query returns %v", got, w)
	}
}

// TestListenDocumentTarget checks that a document listener hears only of its
// document.
func TestListenDocumentTarget(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	setDocs(t, c, map[string]map[string]any{"D/d1": {"v": 1}})
	it := c.Doc("D/d1").Snapshots(ctx)
	t.Cleanup(it.Stop)
	if snap, err := it.Next(); err != nil || !snap.Exists() {
		t.Fatalf("first snapshot = %v, %v; want the document", snap, err)
	}
	setDocs(t, c, map[string]map[string]any{"D/d2": {"v": 2}, "D/d1/sub/x": {"v": 3}})
	setDocs(t, c, map[string]map[string]any{"D/d1": {"v": 4}})
	snap, err := it.Next()
	if err != nil {
		t.Fatalf("second snapshot: %v", err)
	}
	if v, _ := snap.DataAt("v"); v != int64(4) || !strings.HasSuffix(snap.Ref.Path, "/D/d1") {
		t.Errorf("second snapshot = %s v=%v, want D/d1 v=4", snap.Ref.Path, v)
	}
}

func rawRunQuery(ctx context.Context, raw *apiv1.Client, req *pb.RunQueryRequest) ([]string, error) {
	stream, err := raw.RunQuery(ctx, req)
	if err != nil {
		return nil, err
	}
	var names []string
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return names, err
		}
		if d := r.GetDocument(); d != nil {
			names = append(names, strings.TrimPrefix(d.Name, testDB+"/documents/"))
		}
	}
}

func refValue(path string) *pb.Value {
	return &pb.Value{ValueType: &pb.Value_ReferenceValue{ReferenceValue: testDB + "/documents/" + path}}
}

func nameFilter(op pb.StructuredQuery_FieldFilter_Operator, path string) *pb.StructuredQuery_Filter {
	return &pb.StructuredQuery_Filter{FilterType: &pb.StructuredQuery_Filter_FieldFilter{FieldFilter: &pb.StructuredQuery_FieldFilter{
		Field: &pb.StructuredQuery_FieldReference{FieldPath: nameField}, Op: op, Value: refValue(path),
	}}}
}

// TestNumericIDOrder checks Firestore's name order: numeric IDs (__id<n>__)
// first, by value, then string IDs by their UTF-8 bytes.
func TestNumericIDOrder(t *testing.T) {
	srv, c := newTestServer(t)
	raw := newRawClient(t, srv)
	setDocs(t, c, map[string]map[string]any{
		"root/__id7__":       {"v": 1},
		"root/__id-3__":      {"v": 1},
		"root/__id12__":      {"v": 1},
		"root/Alpha":         {"v": 1},
		"root/Root-1":        {"v": 1},
		"root/a1":            {"v": 1},
		"root/Alpha/kids/k1": {"v": 1},
		"root/__id7__/k/k2":  {"v": 1},
		"rootx/y":            {"v": 1},
		"other/o":            {"v": 1},
	})
	coll := c.Collection("root")
	all := []string{"root/__id-3__", "root/__id7__", "root/__id12__", "root/Alpha", "root/Root-1", "root/a1"}
	const minID = "__id-9223372036854775808__"
	// A recursive query as the clients build it: every document below the
	// collection, bounded by the smallest possible names.
	recursive := []string{"root/__id-3__", "root/__id7__", "root/__id7__/k/k2", "root/__id12__", "root/Alpha", "root/Alpha/kids/k1", "root/Root-1", "root/a1"}
	for _, tc := range []struct {
		desc string
		q    *gfs.Query
		raw  *pb.StructuredQuery
		want []string
	}{
		{desc: "order by name", q: ptr(coll.OrderBy(gfs.DocumentID, gfs.Asc)), want: all},
		{desc: "order by name descending", q: ptr(coll.OrderBy(gfs.DocumentID, gfs.Desc)), want: reversed(all)},
		{desc: "name filter", q: ptr(coll.Where(gfs.DocumentID, ">", coll.Doc("__id7__"))), want: all[2:]},
		{desc: "name filter below every string", q: ptr(coll.Where(gfs.DocumentID, ">", coll.Doc("__id99__"))), want: all[3:]},
		{desc: "cursor", q: ptr(coll.OrderBy(gfs.DocumentID, gfs.Asc).StartAfter("__id12__")), want: all[3:]},
		{desc: "limit", q: ptr(coll.OrderBy(gfs.DocumentID, gfs.Asc).Limit(2)), want: all[:2]},
		{desc: "recursive with cursors", raw: &pb.StructuredQuery{
			From:    []*pb.StructuredQuery_CollectionSelector{{AllDescendants: true}},
			OrderBy: []*pb.StructuredQuery_Order{{Field: &pb.StructuredQuery_FieldReference{FieldPath: nameField}, Direction: pb.StructuredQuery_ASCENDING}},
			StartAt: &pb.Cursor{Values: []*pb.Value{refValue("root/" + minID)}, Before: true},
			EndAt:   &pb.Cursor{Values: []*pb.Value{refValue("root\x00/" + minID)}, Before: true},
		}, want: recursive},
		{desc: "recursive with filters", raw: &pb.StructuredQuery{
			From: []*pb.StructuredQuery_CollectionSelector{{AllDescendants: true}},
			Where: &pb.StructuredQuery_Filter{FilterType: &pb.StructuredQuery_Filter_CompositeFilter{CompositeFilter: &pb.StructuredQuery_CompositeFilter{
				Op: pb.StructuredQuery_CompositeFilter_AND,
				Filters: []*pb.StructuredQuery_Filter{
					nameFilter(pb.StructuredQuery_FieldFilter_GREATER_THAN_OR_EQUAL, "root/"+minID),
					nameFilter(pb.StructuredQuery_FieldFilter_LESS_THAN, "root\x00/"+minID),
				},
			}}},
			Limit: wrapperspb.Int32(100),
		}, want: recursive},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := testCtx(t)
			var got []string
			if tc.q != nil {
				docs, err := tc.q.Documents(ctx).GetAll()
				if err != nil {
					t.Fatalf("query: %v", err)
				}
				for _, d := range docs {
					got = append(got, "root/"+d.Ref.ID)
				}
			} else {
				var err error
				if got, err = rawRunQuery(ctx, raw, &pb.RunQueryRequest{Parent: testDB + "/documents", QueryType: &pb.RunQueryRequest_StructuredQuery{StructuredQuery: tc.raw}}); err != nil {
					t.Fatalf("RunQuery: %v", err)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("list documents", func(t *testing.T) {
		refs, err := coll.DocumentRefs(testCtx(t)).GetAll()
		if err != nil {
			t.Fatalf("DocumentRefs: %v", err)
		}
		var got []string
		for _, r := range refs {
			got = append(got, "root/"+r.ID)
		}
		if !slices.Equal(got, all) {
			t.Errorf("got %v, want %v", got, all)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// TestAggregationDocuments checks which documents sum and average read:
// only those holding every aggregated field, in the order Firestore scans
// them (by the aggregated field), so that a limit picks the same documents
// every time.
func TestAggregationDocuments(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	nums := c.Collection("nums")
	// Random IDs, so that name order says nothing about value order.
	for _, x := range []int{20, 3, 17, 8, 1, 14, 11, 5, 19, 2, 16, 9, 7, 12, 4, 18, 10, 6, 15, 13} {
		if _, err := nums.NewDoc().Set(ctx, map[string]any{"x": x, "y": 1}); err != nil {
			t.Fatalf("Set: %v", err)
		}
	}
	for _, id := range []string{"0", "1", "2"} {
		if _, err := nums.Doc(id).Set(ctx, map[string]any{"y": 100}); err != nil {
			t.Fatalf("Set: %v", err)
		}
	}
	books := c.Collection("books")
	setDocs(t, c, map[string]map[string]any{
		"books/a": {"pages": 100, "year": 1980},
		"books/b": {"pages": 50, "year": 2020},
		"books/c": {"pages": 150, "year": 2021},
		"books/d": {"pages": 50},
		"books/e": {"pages": "many", "year": 2000},
	})
	for _, tc := range []struct {
		desc string
		q    *gfs.AggregationQuery
		want map[string]any
	}{
		{"sum with limit takes the smallest values", agg(nums.Limit(12)).WithSum("x", "s").WithCount("n"), map[string]any{"s": int64(78), "n": int64(12)}},
		{"avg with limit", agg(nums.Limit(12)).WithAvg("x", "a"), map[string]any{"a": 6.5}},
		{"explicit order decides", agg(nums.OrderBy("x", gfs.Desc).Limit(3)).WithSum("x", "s"), map[string]any{"s": int64(57)}},
		{"count alone reads every document", agg(nums.Query).WithCount("n"), map[string]any{"n": int64(23)}},
		{"sum skips documents without the field", agg(nums.Query).WithSum("y", "s").WithCount("n"), map[string]any{"s": int64(320), "n": int64(23)}},
		{"only documents with every aggregated field", agg(books.Query).WithSum("pages", "p").WithAvg("year", "y").WithCount("n"),
			map[string]any{"p": int64(300), "y": 2005.25, "n": int64(4)}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for range 3 { // the answer must not change from one run to the next
				got, err := tc.q.Get(ctx)
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				for k, want := range tc.want {
					if g := got[k]; !aggEqual(g, want) {
						t.Fatalf("aggregation %s = %v, want %v", k, g, want)
					}
				}
			}
		})
	}
}

// TestAggregationInTransaction checks that an aggregation read in a
// transaction does not make its commit fail when nothing changed.
func TestAggregationInTransaction(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	setDocs(t, c, map[string]map[string]any{"t/a": {"x": 1}, "t/b": {"y": 2}})
	attempts := 0
	err := c.RunTransaction(ctx, func(ctx context.Context, tx *gfs.Transaction) error {
		attempts++
		res, err := agg(c.Collection("t").Limit(5)).WithSum("x", "s").Transaction(tx).Get(ctx)
		if err != nil {
			return err
		}
		if !aggEqual(res["s"], int64(1)) {
			t.Errorf("sum = %v, want 1", res["s"])
		}
		return tx.Set(c.Doc("t/c"), map[string]any{"z": 3})
	}, gfs.MaxAttempts(1))
	if err != nil || attempts != 1 {
		t.Errorf("transaction = %v after %d attempts, want success at once", err, attempts)
	}
}

// TestBatchGetDuplicates checks that a document requested twice comes back
// once.
func TestBatchGetDuplicates(t *testing.T) {
	srv, c := newTestServer(t)
	raw := newRawClient(t, srv)
	setDocs(t, c, map[string]map[string]any{"g/a": {"v": 1}, "g/b": {"v": 2}})
	name := func(p string) string { return testDB + "/documents/" + p }
	for _, tc := range []struct {
		desc string
		req  *pb.BatchGetDocumentsRequest
		want []string // found or missing names, in order
	}{
		{"found twice", &pb.BatchGetDocumentsRequest{Database: testDB, Documents: []string{name("g/a"), name("g/b"), name("g/a")}}, []string{"g/a", "g/b"}},
		{"missing twice", &pb.BatchGetDocumentsRequest{Database: testDB, Documents: []string{name("g/x"), name("g/x"), name("g/a")}}, []string{"g/x", "g/a"}},
		{"in a new transaction", &pb.BatchGetDocumentsRequest{Database: testDB, Documents: []string{name("g/b"), name("g/b")},
			ConsistencySelector: &pb.BatchGetDocumentsRequest_NewTransaction{NewTransaction: &pb.TransactionOptions{}}}, []string{"g/b"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			resps, err := batchGet(testCtx(t), raw, tc.req)
			if err != nil {
				t.Fatalf("BatchGetDocuments: %v", err)
			}
			var got []string
			for _, r := range resps {
				n := r.GetFound().GetName()
				if n == "" {
					n = r.GetMissing()
				}
				got = append(got, strings.TrimPrefix(n, testDB+"/documents/"))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestErrorsAsFirestore checks the codes, and the messages clients and users
// match on, of failed preconditions and invalid aggregations.
func TestErrorsAsFirestore(t *testing.T) {
	srv, c := newTestServer(t)
	raw := newRawClient(t, srv)
	ctx := testCtx(t)
	doc := c.Doc("e/doc")
	wr, err := doc.Create(ctx, map[string]any{"v": 1})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	future := wr.UpdateTime.Add(time.Hour)
	runAgg := func(aggs ...*pb.StructuredAggregationQuery_Aggregation) error {
		stream, err := raw.RunAggregationQuery(ctx, &pb.RunAggregationQueryRequest{
			Parent: testDB + "/documents",
			QueryType: &pb.RunAggregationQueryRequest_StructuredAggregationQuery{StructuredAggregationQuery: &pb.StructuredAggregationQuery{
				QueryType:    &pb.StructuredAggregationQuery_StructuredQuery{StructuredQuery: &pb.StructuredQuery{From: []*pb.StructuredQuery_CollectionSelector{{CollectionId: "e"}}}},
				Aggregations: aggs,
			}},
		})
		if err != nil {
			return err
		}
		_, err = stream.Recv()
		return err
	}
	count := func(alias string) *pb.StructuredAggregationQuery_Aggregation {
		return &pb.StructuredAggregationQuery_Aggregation{Alias: alias, Operator: &pb.StructuredAggregationQuery_Aggregation_Count_{Count: &pb.StructuredAggregationQuery_Aggregation_Count{}}}
	}
	for _, tc := range []struct {
		desc     string
		call     func() error
		code     codes.Code
		msgStart string
		msgHas   string
	}{
		{"delete with a future update time", func() error { _, err := doc.Delete(ctx, gfs.LastUpdateTime(future)); return err }, codes.InvalidArgument, "", "future"},
		{"update with a future update time", func() error {
			_, err := doc.Update(ctx, []gfs.Update{{Path: "v", Value: 2}}, gfs.LastUpdateTime(future))
			return err
		}, codes.InvalidArgument, "", "future"},
		{"delete with a stale update time", func() error {
			_, err := doc.Delete(ctx, gfs.LastUpdateTime(wr.UpdateTime.Add(-time.Millisecond)))
			return err
		}, codes.FailedPrecondition, "the stored version (", "does not match the required base version ("},
		{"update missing", func() error { _, err := c.Doc("e/none").Update(ctx, []gfs.Update{{Path: "v", Value: 1}}); return err },
			codes.NotFound, "No document to update: " + testDB + "/documents/e/none", ""},
		{"create existing", func() error { _, err := doc.Create(ctx, map[string]any{"v": 2}); return err },
			codes.AlreadyExists, "Document already exists: " + testDB + "/documents/e/doc", ""},
		// Firestore's wording, which the Python client's system tests
		// match (googleapis/python-firestore, tests/system/test_system.py:
		// test_count_query_get_empty_aggregation and
		// test_count_query_get_multiple_aggregations_duplicated_alias).
		{"no aggregations", func() error { return runAgg() }, codes.InvalidArgument, "Aggregations can not be empty", ""},
		{"duplicate alias", func() error { return runAgg(count("a"), count("a")) }, codes.InvalidArgument,
			"Aggregation aliases contain duplicate alias", ": a."},
		{"duplicate default alias", func() error { return runAgg(count(""), count("field_1")) }, codes.InvalidArgument,
			"Aggregation aliases contain duplicate alias", ": field_1."},
		{"too many aggregations", func() error {
			return runAgg(count("a"), count("b"), count("c"), count("d"), count("e"), count("f"))
		}, codes.InvalidArgument, "", "maximum number of aggregations"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := tc.call()
			if status.Code(err) != tc.code {
				t.Fatalf("error = %v, want code %v", err, tc.code)
			}
			if msg := status.Convert(err).Message(); !strings.HasPrefix(msg, tc.msgStart) || !strings.Contains(msg, tc.msgHas) {
				t.Errorf("message = %q, want it to start with %q and contain %q", msg, tc.msgStart, tc.msgHas)
			}
		})
	}
}

// TestAggregationDefaultAliases checks Firestore's names for aggregations
// without an alias: field_1, field_2, ... counting only those.
func TestAggregationDefaultAliases(t *testing.T) {
	srv, c := newTestServer(t)
	raw := newRawClient(t, srv)
	ctx := testCtx(t)
	setDocs(t, c, map[string]map[string]any{"al/a": {"v": 1}})
	count := func(alias string) *pb.StructuredAggregationQuery_Aggregation {
		return &pb.StructuredAggregationQuery_Aggregation{Alias: alias, Operator: &pb.StructuredAggregationQuery_Aggregation_Count_{Count: &pb.StructuredAggregationQuery_Aggregation_Count{}}}
	}
	stream, err := raw.RunAggregationQuery(ctx, &pb.RunAggregationQueryRequest{
		Parent: testDB + "/documents",
		QueryType: &pb.RunAggregationQueryRequest_StructuredAggregationQuery{StructuredAggregationQuery: &pb.StructuredAggregationQuery{
			QueryType:    &pb.StructuredAggregationQuery_StructuredQuery{StructuredQuery: &pb.StructuredQuery{From: []*pb.StructuredQuery_CollectionSelector{{CollectionId: "al"}}}},
			Aggregations: []*pb.StructuredAggregationQuery_Aggregation{count("c1"), count(""), count("c3"), count("")},
		}},
	})
	if err != nil {
		t.Fatalf("RunAggregationQuery: %v", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	var got []string
	for k := range resp.GetResult().GetAggregateFields() {
		got = append(got, k)
	}
	slices.Sort(got)
	if want := []string{"c1", "c3", "field_1", "field_2"}; !slices.Equal(got, want) {
		t.Errorf("aliases = %v, want %v", got, want)
	}
}
