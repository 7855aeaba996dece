package firestore

import (
	"context"
	"errors"
	"io"
	"reflect"
	"testing"

	gfs "cloud.google.com/go/firestore"
	apiv1 "cloud.google.com/go/firestore/apiv1"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/iterator"
)

// seedExplainDocs writes three documents, two of them with foo == 1.
func seedExplainDocs(t *testing.T, c *gfs.Client) *gfs.CollectionRef {
	t.Helper()
	ctx := testCtx(t)
	coll := c.Collection("explain")
	for id, foo := range map[string]int{"doc1": 1, "doc2": 2, "doc3": 1} {
		if _, err := coll.Doc(id).Set(ctx, map[string]any{"foo": foo}); err != nil {
			t.Fatalf("Set(%s): %v", id, err)
		}
	}
	return coll
}

func runQueryResponses(ctx context.Context, c *apiv1.Client, req *pb.RunQueryRequest) ([]*pb.RunQueryResponse, error) {
	stream, err := c.RunQuery(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []*pb.RunQueryResponse
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

func runAggregationResponses(ctx context.Context, c *apiv1.Client, req *pb.RunAggregationQueryRequest) ([]*pb.RunAggregationQueryResponse, error) {
	stream, err := c.RunAggregationQuery(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []*pb.RunAggregationQueryResponse
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

func fooQuery(op pb.StructuredQuery_FieldFilter_Operator, v int64) *pb.StructuredQuery {
	return &pb.StructuredQuery{
		From: []*pb.StructuredQuery_CollectionSelector{{CollectionId: "explain"}},
		Where: &pb.StructuredQuery_Filter{FilterType: &pb.StructuredQuery_Filter_FieldFilter{FieldFilter: &pb.StructuredQuery_FieldFilter{
			Field: &pb.StructuredQuery_FieldReference{FieldPath: "foo"},
			Op:    op,
			Value: &pb.Value{ValueType: &pb.Value_IntegerValue{IntegerValue: v}},
		}}},
	}
}

// Without analyze, Firestore plans the query and does not run it: the
// stream carries one response with the plan, and neither a read time nor
// documents, so clients build no snapshot.
func TestExplainWithoutAnalyzeAnswersThePlanAlone(t *testing.T) {
	srv, c := newTestServer(t)
	raw := newRawClient(t, srv)
	seedExplainDocs(t, c)
	ctx := testCtx(t)

	for _, tc := range []struct {
		desc string
		req  *pb.RunQueryRequest
	}{
		{"query", &pb.RunQueryRequest{
			Parent:         testDB + "/documents",
			QueryType:      &pb.RunQueryRequest_StructuredQuery{StructuredQuery: fooQuery(pb.StructuredQuery_FieldFilter_GREATER_THAN, 0)},
			ExplainOptions: &pb.ExplainOptions{},
		}},
		{"query in a new transaction", &pb.RunQueryRequest{
			Parent:              testDB + "/documents",
			QueryType:           &pb.RunQueryRequest_StructuredQuery{StructuredQuery: fooQuery(pb.StructuredQuery_FieldFilter_GREATER_THAN, 0)},
			ExplainOptions:      &pb.ExplainOptions{},
			ConsistencySelector: &pb.RunQueryRequest_NewTransaction{NewTransaction: &pb.TransactionOptions{}},
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			resps, err := runQueryResponses(ctx, raw, tc.req)
			if err != nil {
				t.Fatalf("RunQuery: %v", err)
			}
			if len(resps) != 1 {
				t.Fatalf("got %d responses, want 1: %v", len(resps), resps)
			}
			r := resps[0]
			if r.ReadTime != nil || r.Document != nil || r.SkippedResults != 0 {
				t.Errorf("plan-only response carries a result: read time %v, document %v, skipped %d", r.ReadTime, r.Document, r.SkippedResults)
			}
			m := r.GetExplainMetrics()
			if len(m.GetPlanSummary().GetIndexesUsed()) == 0 || m.GetExecutionStats() != nil {
				t.Errorf("explain metrics = %v, want a plan and no execution statistics", m)
			}
			if _, ok := tc.req.ConsistencySelector.(*pb.RunQueryRequest_NewTransaction); ok && len(r.Transaction) == 0 {
				t.Errorf("the response does not carry the transaction begun")
			}
		})
	}

	aggReq := &pb.RunAggregationQueryRequest{
		Parent: testDB + "/documents",
		QueryType: &pb.RunAggregationQueryRequest_StructuredAggregationQuery{StructuredAggregationQuery: &pb.StructuredAggregationQuery{
			QueryType: &pb.StructuredAggregationQuery_StructuredQuery{StructuredQuery: fooQuery(pb.StructuredQuery_FieldFilter_GREATER_THAN, 0)},
			Aggregations: []*pb.StructuredAggregationQuery_Aggregation{{
				Alias:    "count",
				Operator: &pb.StructuredAggregationQuery_Aggregation_Count_{Count: &pb.StructuredAggregationQuery_Aggregation_Count{}},
			}},
		}},
		ExplainOptions: &pb.ExplainOptions{},
	}
	aggs, err := runAggregationResponses(ctx, raw, aggReq)
	if err != nil {
		t.Fatalf("RunAggregationQuery: %v", err)
	}
	if len(aggs) != 1 {
		t.Fatalf("aggregation: got %d responses, want 1", len(aggs))
	}
	if a := aggs[0]; a.ReadTime != nil || a.Result != nil || len(a.GetExplainMetrics().GetPlanSummary().GetIndexesUsed()) == 0 || a.GetExplainMetrics().GetExecutionStats() != nil {
		t.Errorf("aggregation plan-only response = %v, want the plan alone", a)
	}

	// The official client sees no documents and the plan.
	it := c.Collection("explain").Where("foo", ">", 0).WithRunOptions(gfs.ExplainOptions{Analyze: false}).Documents(ctx)
	if _, err := it.Next(); !errors.Is(err, iterator.Done) {
		t.Fatalf("Next = %v, want iterator.Done", err)
	}
	m, err := it.ExplainMetrics()
	if err != nil || m == nil || m.PlanSummary == nil || len(m.PlanSummary.IndexesUsed) == 0 || m.ExecutionStats != nil {
		t.Fatalf("ExplainMetrics = %+v, %v; want a plan and no execution statistics", m, err)
	}
}

func debugStats(docsScanned, entriesScanned, docsBillable, entriesBillable, minCost string) map[string]any {
	return map[string]any{
		"documents_scanned":     docsScanned,
		"index_entries_scanned": entriesScanned,
		"billing_details": map[string]any{
			"documents_billable":     docsBillable,
			"index_entries_billable": entriesBillable,
			"small_ops":              "0",
			"min_query_cost":         minCost,
		},
	}
}

// Profiling a query reports what it returned, what it read and what it
// cost, in Firestore's debug statistics, and how long it ran.
func TestExplainAnalyzeReportsExecutionStatistics(t *testing.T) {
	_, c := newTestServer(t)
	coll := seedExplainDocs(t, c)
	ctx := testCtx(t)
	analyze := gfs.ExplainOptions{Analyze: true}

	for _, tc := range []struct {
		desc      string
		q         gfs.Query
		docs      int
		readOps   int64
		wantDebug map[string]any
	}{
		{"two matches", coll.Where("foo", "==", 1), 2, 2, debugStats("2", "2", "2", "0", "0")},
		{"no match", coll.Where("foo", "==", 12345), 0, 1, debugStats("0", "0", "0", "0", "1")},
		// Skipped documents are read, and billed, all the same.
		{"offset", coll.OrderBy("foo", gfs.Asc).Offset(1), 2, 3, debugStats("3", "3", "3", "0", "0")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			it := tc.q.WithRunOptions(analyze).Documents(ctx)
			docs, err := it.GetAll()
			if err != nil {
				t.Fatalf("GetAll: %v", err)
			}
			if len(docs) != tc.docs {
				t.Errorf("got %d documents, want %d", len(docs), tc.docs)
			}
			m, err := it.ExplainMetrics()
			if err != nil || m == nil || m.ExecutionStats == nil {
				t.Fatalf("ExplainMetrics = %+v, %v; want execution statistics", m, err)
			}
			st := m.ExecutionStats
			if st.ResultsReturned != int64(tc.docs) || st.ReadOperations != tc.readOps {
				t.Errorf("results returned %d, read operations %d; want %d, %d", st.ResultsReturned, st.ReadOperations, tc.docs, tc.readOps)
			}
			if st.ExecutionDuration == nil || *st.ExecutionDuration <= 0 {
				t.Errorf("execution duration = %v, want > 0", st.ExecutionDuration)
			}
			if st.DebugStats == nil || !reflect.DeepEqual(*st.DebugStats, tc.wantDebug) {
				t.Errorf("debug stats = %v, want %v", st.DebugStats, tc.wantDebug)
			}
		})
	}
}

// Profiling an aggregation reports the index entries it counted, one
// result, and the time it took.
func TestExplainAnalyzeAggregation(t *testing.T) {
	_, c := newTestServer(t)
	coll := seedExplainDocs(t, c)
	ctx := testCtx(t)

	for _, tc := range []struct {
		desc      string
		q         gfs.Query
		count     int64
		wantDebug map[string]any
	}{
		{"count", coll.Where("foo", "<", 3), 3, debugStats("0", "3", "0", "3", "0")},
		{"count of nothing", coll.Where("foo", ">", 3), 0, debugStats("0", "0", "0", "0", "1")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			q := tc.q.WithRunOptions(gfs.ExplainOptions{Analyze: true})
			resp, err := q.NewAggregationQuery().WithCount("count").GetResponse(ctx)
			if err != nil {
				t.Fatalf("GetResponse: %v", err)
			}
			if got := resp.Result["count"].(*pb.Value).GetIntegerValue(); got != tc.count {
				t.Errorf("count = %d, want %d", got, tc.count)
			}
			if resp.ExplainMetrics == nil || resp.ExplainMetrics.ExecutionStats == nil {
				t.Fatalf("explain metrics = %+v, want execution statistics", resp.ExplainMetrics)
			}
			st := resp.ExplainMetrics.ExecutionStats
			if st.ResultsReturned != 1 || st.ReadOperations != 1 {
				t.Errorf("results returned %d, read operations %d; want 1, 1", st.ResultsReturned, st.ReadOperations)
			}
			if st.ExecutionDuration == nil || *st.ExecutionDuration <= 0 {
				t.Errorf("execution duration = %v, want > 0", st.ExecutionDuration)
			}
			if st.DebugStats == nil || !reflect.DeepEqual(*st.DebugStats, tc.wantDebug) {
				t.Errorf("debug stats = %v, want %v", st.DebugStats, tc.wantDebug)
			}
		})
	}
}
