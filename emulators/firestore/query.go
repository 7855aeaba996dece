package firestore

import (
	"context"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// maxDisjunction is Firestore's limit on the values of in, not-in and
// array-contains-any filters.
const maxDisjunction = 30

// query is a validated structured query, ready to run against a snapshot.
type query struct {
	db        string
	parent    string // document path of the parent, "" for the root
	collID    string
	allDesc   bool
	filter    *pb.StructuredQuery_Filter
	orders    []order
	aggOrders []order // fields sum and avg read, ordered just before the final name order
	start     *pb.Cursor
	end       *pb.Cursor
	offset    int
	limit     int // -1: no limit
	selectAll bool
	fields    []fieldPath
	nearest   *nearest
}

type order struct {
	path fieldPath // nil for __name__
	desc bool
}

const nameField = "__name__"

// compileQuery validates a structured query run under parent.
func compileQuery(parent string, sq *pb.StructuredQuery) (*query, error) {
	db, parentPath, err := parseParent(parent)
	if err != nil {
		return nil, err
	}
	if sq == nil {
		return nil, status.Errorf(codes.InvalidArgument, "missing structured query")
	}
	if len(sq.GetFrom()) != 1 {
		return nil, status.Errorf(codes.InvalidArgument, "a query must select exactly one collection, got %d", len(sq.GetFrom()))
	}
	from := sq.GetFrom()[0]
	if from.GetCollectionId() == "" && !from.GetAllDescendants() {
		return nil, status.Errorf(codes.InvalidArgument, "a query must name a collection")
	}
	if id := from.GetCollectionId(); id != "" {
		if err := checkID(id, parent+"/"+id); err != nil {
			return nil, err
		}
	}
	q := &query{db: db, parent: parentPath, collID: from.GetCollectionId(), allDesc: from.GetAllDescendants(), filter: sq.GetWhere(), limit: -1, selectAll: sq.GetSelect() == nil}
	if fn := sq.GetFindNearest(); fn != nil {
		if err := q.compileNearest(fn); err != nil {
			return nil, err
		}
	}
	if sq.GetOffset() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "negative offset %d", sq.GetOffset())
	}
	q.offset = int(sq.GetOffset())
	if l := sq.GetLimit(); l != nil {
		if l.GetValue() < 0 {
			return nil, status.Errorf(codes.InvalidArgument, "negative limit %d", l.GetValue())
		}
		q.limit = int(l.GetValue())
	}
	for _, f := range sq.GetSelect().GetFields() {
		p, err := parseFieldPath(f.GetFieldPath())
		if err != nil {
			return nil, err
		}
		if f.GetFieldPath() != nameField {
			q.fields = append(q.fields, p)
		}
	}
	var ineq []string
	if err := checkFilter(db, sq.GetWhere(), &ineq, 0); err != nil {
		return nil, err
	}
	explicit := map[string]bool{}
	hasName := false
	for _, o := range sq.GetOrderBy() {
		p, err := parseFieldPath(o.GetField().GetFieldPath())
		if err != nil {
			return nil, err
		}
		desc := o.GetDirection() == pb.StructuredQuery_DESCENDING
		if o.GetField().GetFieldPath() == nameField {
			q.orders = append(q.orders, order{desc: desc})
			hasName = true
			break // nothing can order after the unique name
		}
		if explicit[p.String()] {
			return nil, status.Errorf(codes.InvalidArgument, "order by %s appears twice", p)
		}
		explicit[p.String()] = true
		q.orders = append(q.orders, order{path: p, desc: desc})
	}
	lastDesc := len(q.orders) > 0 && q.orders[len(q.orders)-1].desc
	if !hasName {
		// Firestore orders by the inequality fields not ordered explicitly,
		// then by name, in the direction of the last explicit order.
		sort.Strings(ineq)
		for i, f := range ineq {
			if f == nameField || explicit[f] || (i > 0 && ineq[i-1] == f) {
				continue
			}
			p, _ := parseFieldPath(f)
			q.orders = append(q.orders, order{path: p, desc: lastDesc})
		}
		q.orders = append(q.orders, order{desc: lastDesc})
	}
	for _, c := range []*pb.Cursor{sq.GetStartAt(), sq.GetEndAt()} {
		if c == nil {
			continue
		}
		if len(c.GetValues()) > len(q.orders) {
			return nil, status.Errorf(codes.InvalidArgument, "cursor has %d values but the query orders by only %d fields", len(c.GetValues()), len(q.orders))
		}
		for i, v := range c.GetValues() {
			if err := validateValue(v, "", 1, false); err != nil {
				return nil, err
			}
			if q.orders[i].path == nil {
				if _, ok := v.GetValueType().(*pb.Value_ReferenceValue); !ok {
					return nil, status.Errorf(codes.InvalidArgument, "a cursor value for __name__ must be a document reference")
				}
				if err := checkCursorName(q, v.GetReferenceValue()); err != nil {
					return nil, err
				}
			}
		}
	}
	q.start, q.end = sq.GetStartAt(), sq.GetEndAt()
	return q, nil
}

// checkCursorName rejects a __name__ cursor outside the queried scope.
func checkCursorName(q *query, ref string) error {
	n, err := parseDocName(ref)
	if err != nil {
		return err
	}
	if n.db != q.db {
		return status.Errorf(codes.InvalidArgument, "cursor reference %q is in another database", ref)
	}
	if !q.allDesc {
		if !inScope(n.path, q.parent, q.collID, false) {
			return status.Errorf(codes.InvalidArgument, "cursor reference %q is not a document of the queried collection", ref)
		}
	}
	return nil
}

// checkFilter validates a filter tree and collects its inequality fields.
func checkFilter(db string, f *pb.StructuredQuery_Filter, ineq *[]string, depth int) error {
	if f == nil {
		return nil
	}
	if depth > maxDepth {
		return status.Errorf(codes.InvalidArgument, "filter nested too deeply")
	}
	switch x := f.GetFilterType().(type) {
	case *pb.StructuredQuery_Filter_CompositeFilter:
		op := x.CompositeFilter.GetOp()
		if op != pb.StructuredQuery_CompositeFilter_AND && op != pb.StructuredQuery_CompositeFilter_OR {
			return status.Errorf(codes.InvalidArgument, "invalid composite filter operator %v", op)
		}
		if len(x.CompositeFilter.GetFilters()) == 0 {
			return status.Errorf(codes.InvalidArgument, "a composite filter needs at least one filter")
		}
		for _, sub := range x.CompositeFilter.GetFilters() {
			if err := checkFilter(db, sub, ineq, depth+1); err != nil {
				return err
			}
		}
		return nil
	case *pb.StructuredQuery_Filter_FieldFilter:
		ff := x.FieldFilter
		path := ff.GetField().GetFieldPath()
		if _, err := parseFieldPath(path); err != nil {
			return err
		}
		v := ff.GetValue()
		if err := validateValue(v, "", 1, false); err != nil {
			return err
		}
		switch op := ff.GetOp(); op {
		case pb.StructuredQuery_FieldFilter_EQUAL:
		case pb.StructuredQuery_FieldFilter_NOT_EQUAL:
			*ineq = append(*ineq, path)
		case pb.StructuredQuery_FieldFilter_LESS_THAN, pb.StructuredQuery_FieldFilter_LESS_THAN_OR_EQUAL,
			pb.StructuredQuery_FieldFilter_GREATER_THAN, pb.StructuredQuery_FieldFilter_GREATER_THAN_OR_EQUAL:
			if isNull(v) || isNaN(v) {
				return status.Errorf(codes.InvalidArgument, "null and NaN only support equality filters")
			}
			*ineq = append(*ineq, path)
		case pb.StructuredQuery_FieldFilter_ARRAY_CONTAINS:
			if path == nameField {
				return status.Errorf(codes.InvalidArgument, "array-contains is not valid on __name__")
			}
		case pb.StructuredQuery_FieldFilter_IN, pb.StructuredQuery_FieldFilter_NOT_IN, pb.StructuredQuery_FieldFilter_ARRAY_CONTAINS_ANY:
			a, ok := v.GetValueType().(*pb.Value_ArrayValue)
			if !ok || len(a.ArrayValue.GetValues()) == 0 {
				return status.Errorf(codes.InvalidArgument, "%v needs a non-empty array value", op)
			}
			if len(a.ArrayValue.GetValues()) > maxDisjunction {
				return status.Errorf(codes.InvalidArgument, "%v supports at most %d values", op, maxDisjunction)
			}
			if op == pb.StructuredQuery_FieldFilter_NOT_IN {
				*ineq = append(*ineq, path)
			}
		default:
			return status.Errorf(codes.InvalidArgument, "invalid field filter operator %v", op)
		}
		if path == nameField {
			return checkNameFilterValue(db, ff)
		}
		return nil
	case *pb.StructuredQuery_Filter_UnaryFilter:
		path := x.UnaryFilter.GetField().GetFieldPath()
		if _, err := parseFieldPath(path); err != nil {
			return err
		}
		switch op := x.UnaryFilter.GetOp(); op {
		case pb.StructuredQuery_UnaryFilter_IS_NAN, pb.StructuredQuery_UnaryFilter_IS_NULL:
		case pb.StructuredQuery_UnaryFilter_IS_NOT_NAN, pb.StructuredQuery_UnaryFilter_IS_NOT_NULL:
			*ineq = append(*ineq, path)
		default:
			return status.Errorf(codes.InvalidArgument, "invalid unary filter operator %v", op)
		}
		return nil
	}
	return status.Errorf(codes.InvalidArgument, "filter has no filter type")
}

func checkNameFilterValue(db string, ff *pb.StructuredQuery_FieldFilter) error {
	vals := []*pb.Value{ff.GetValue()}
	if a, ok := ff.GetValue().GetValueType().(*pb.Value_ArrayValue); ok {
		vals = a.ArrayValue.GetValues()
	}
	for _, v := range vals {
		ref, ok := v.GetValueType().(*pb.Value_ReferenceValue)
		if !ok {
			return status.Errorf(codes.InvalidArgument, "a filter on __name__ needs document references, got %v", v)
		}
		n, err := parseDocName(ref.ReferenceValue)
		if err != nil {
			return err
		}
		if n.db != db {
			return status.Errorf(codes.InvalidArgument, "reference %q is in another database", ref.ReferenceValue)
		}
	}
	return nil
}

// fieldValue is the value a filter or order sees: the reference to the
// document itself for __name__.
func fieldValue(doc *pb.Document, path string) *pb.Value {
	if path == nameField {
		return &pb.Value{ValueType: &pb.Value_ReferenceValue{ReferenceValue: doc.Name}}
	}
	p, _ := parseFieldPath(path)
	return getField(doc.Fields, p)
}

func (o order) value(doc *pb.Document) *pb.Value {
	if o.path == nil {
		return &pb.Value{ValueType: &pb.Value_ReferenceValue{ReferenceValue: doc.Name}}
	}
	return getField(doc.Fields, o.path)
}

// matches evaluates a filter tree on a document.
func matches(doc *pb.Document, f *pb.StructuredQuery_Filter) bool {
	switch x := f.GetFilterType().(type) {
	case nil:
		return true
	case *pb.StructuredQuery_Filter_CompositeFilter:
		and := x.CompositeFilter.GetOp() == pb.StructuredQuery_CompositeFilter_AND
		for _, sub := range x.CompositeFilter.GetFilters() {
			if matches(doc, sub) != and {
				return !and
			}
		}
		return and
	case *pb.StructuredQuery_Filter_UnaryFilter:
		v := fieldValue(doc, x.UnaryFilter.GetField().GetFieldPath())
		if v == nil {
			return false
		}
		switch x.UnaryFilter.GetOp() {
		case pb.StructuredQuery_UnaryFilter_IS_NAN:
			return isNaN(v)
		case pb.StructuredQuery_UnaryFilter_IS_NULL:
			return isNull(v)
		case pb.StructuredQuery_UnaryFilter_IS_NOT_NAN:
			return !isNaN(v) && !isNull(v)
		case pb.StructuredQuery_UnaryFilter_IS_NOT_NULL:
			return !isNull(v)
		}
		return false
	case *pb.StructuredQuery_Filter_FieldFilter:
		return matchField(doc, x.FieldFilter)
	}
	return false
}

func matchField(doc *pb.Document, ff *pb.StructuredQuery_FieldFilter) bool {
	v := fieldValue(doc, ff.GetField().GetFieldPath())
	if v == nil {
		return false // documents lacking the field never match
	}
	want := ff.GetValue()
	switch ff.GetOp() {
	case pb.StructuredQuery_FieldFilter_EQUAL:
		return valuesEqual(v, want)
	case pb.StructuredQuery_FieldFilter_NOT_EQUAL:
		return !isNull(v) && !valuesEqual(v, want)
	case pb.StructuredQuery_FieldFilter_LESS_THAN:
		// NaN orders before every number, but no range filter matches it.
		return typeRank(v) == typeRank(want) && !isNaN(v) && compareValues(v, want) < 0
	case pb.StructuredQuery_FieldFilter_LESS_THAN_OR_EQUAL:
		return typeRank(v) == typeRank(want) && !isNaN(v) && compareValues(v, want) <= 0
	case pb.StructuredQuery_FieldFilter_GREATER_THAN:
		return typeRank(v) == typeRank(want) && compareValues(v, want) > 0
	case pb.StructuredQuery_FieldFilter_GREATER_THAN_OR_EQUAL:
		return typeRank(v) == typeRank(want) && compareValues(v, want) >= 0
	case pb.StructuredQuery_FieldFilter_ARRAY_CONTAINS:
		a, ok := v.GetValueType().(*pb.Value_ArrayValue)
		return ok && containsValue(a.ArrayValue.GetValues(), want)
	case pb.StructuredQuery_FieldFilter_ARRAY_CONTAINS_ANY:
		a, ok := v.GetValueType().(*pb.Value_ArrayValue)
		if !ok {
			return false
		}
		for _, w := range want.GetArrayValue().GetValues() {
			if containsValue(a.ArrayValue.GetValues(), w) {
				return true
			}
		}
		return false
	case pb.StructuredQuery_FieldFilter_IN:
		return containsValue(want.GetArrayValue().GetValues(), v)
	case pb.StructuredQuery_FieldFilter_NOT_IN:
		for _, w := range want.GetArrayValue().GetValues() {
			if isNull(w) {
				return false
			}
		}
		return !isNull(v) && !containsValue(want.GetArrayValue().GetValues(), v)
	}
	return false
}

// compareDocs orders two documents by the query's orders.
func (q *query) compareDocs(a, b *pb.Document) int {
	orders := q.orders
	if len(q.aggOrders) > 0 {
		n := len(orders) - 1 // the orders end with __name__
		orders = append(append(append([]order(nil), orders[:n]...), q.aggOrders...), orders[n])
	}
	for _, o := range orders {
		c := compareValues(o.value(a), o.value(b))
		if o.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// compareCursor orders a document against a cursor's values.
func (q *query) compareCursor(doc *pb.Document, c *pb.Cursor) int {
	for i, cv := range c.GetValues() {
		o := q.orders[i]
		r := compareValues(o.value(doc), cv)
		if o.desc {
			r = -r
		}
		if r != 0 {
			return r
		}
	}
	return 0
}

// candidates returns the stored documents in the query's scope that
// existed at time at (the latest if zero), found through the database's
// indexes so that the cost follows the scope, not the database. They come
// in no particular order: run sorts what matches, so no snapshot of the
// whole database is sorted. Must be called with the lock held.
func (q *query) candidates(d *database, at time.Time) []*pb.Document {
	var docs []*pb.Document
	for _, e := range d.scope(q.parent, q.collID, q.allDesc) {
		if doc := e.at(at); doc != nil {
			docs = append(docs, doc)
		}
	}
	return docs
}

// run evaluates the query on candidates (every document of its scope, in
// any order) and returns the matching stored documents in query order,
// and how many the offset skipped. The orders end with the unique name, so
// the result does not depend on the candidates' order. The documents must
// not be changed.
func (q *query) run(candidates []*pb.Document) ([]*pb.Document, int) {
	var out []*pb.Document
docs:
	for _, doc := range candidates {
		for _, os := range [][]order{q.orders, q.aggOrders} {
			for _, o := range os {
				if o.path != nil && getField(doc.Fields, o.path) == nil {
					continue docs // Firestore only returns documents with every ordered field
				}
			}
		}
		if q.filter != nil && !matches(doc, q.filter) {
			continue
		}
		if q.start != nil {
			c := q.compareCursor(doc, q.start)
			if c < 0 || (c == 0 && !q.start.GetBefore()) {
				continue
			}
		}
		if q.end != nil {
			c := q.compareCursor(doc, q.end)
			if c > 0 || (c == 0 && q.end.GetBefore()) {
				continue
			}
		}
		out = append(out, doc)
	}
	sort.SliceStable(out, func(i, j int) bool { return q.compareDocs(out[i], out[j]) < 0 })
	if q.nearest != nil {
		return q.nearest.run(out), 0
	}
	skipped := min(q.offset, len(out))
	out = out[skipped:]
	if q.limit >= 0 && len(out) > q.limit {
		out = out[:q.limit]
	}
	return out, skipped
}

// shape copies a result document for the caller, applying the projection.
func (q *query) shape(doc *pb.Document) *pb.Document {
	d := cloneDoc(doc)
	if !q.selectAll {
		d.Fields = project(d.Fields, q.fields)
	}
	return d
}

func versionsOf(docs []*pb.Document) []docVersion {
	out := make([]docVersion, len(docs))
	for i, d := range docs {
		out[i] = docVersion{name: d.Name, at: d.UpdateTime.AsTime()}
	}
	return out
}

// RunQuery implements the Firestore RunQuery RPC.
func (s *GServer) RunQuery(req *pb.RunQueryRequest, stream pb.Firestore_RunQueryServer) error {
	started := time.Now()
	q, err := compileQuery(req.GetParent(), req.GetStructuredQuery())
	if err != nil {
		return err
	}
	eo := req.GetExplainOptions()
	resps, st, err := s.runQuery(req, q, eo == nil || eo.GetAnalyze())
	if err != nil {
		return err
	}
	if eo != nil {
		m := &pb.ExplainMetrics{PlanSummary: planSummary(q)}
		if eo.GetAnalyze() {
			m.ExecutionStats = st.proto(time.Since(started))
		}
		resps[len(resps)-1].ExplainMetrics = m
	}
	for _, r := range resps {
		if err := stream.Send(r); err != nil {
			return err
		}
	}
	return nil
}

// execStats is what running a query cost, as Firestore reports it when
// asked to analyze the query: the work of serving it from an index that
// holds exactly its results.
type execStats struct {
	results         int // documents, or aggregation results, returned
	docsScanned     int
	entriesScanned  int
	docsBillable    int
	entriesBillable int
	readOps         int
}

// queryStats are those of a query that returned results documents and
// skipped skipped: each is an index entry scanned and a document read and
// billed.
func queryStats(results, skipped int) execStats {
	n := results + skipped
	return execStats{results: results, docsScanned: n, entriesScanned: n, docsBillable: n, readOps: max(n, 1)}
}

// aggregationStats are those of an aggregation over n index entries: no
// document is read, and every 1000 entries are billed as one read.
func aggregationStats(n int) execStats {
	return execStats{results: 1, entriesScanned: n, entriesBillable: n, readOps: max((n+999)/1000, 1)}
}

func (e execStats) proto(d time.Duration) *pb.ExecutionStats {
	count := func(n int) *structpb.Value { return structpb.NewStringValue(strconv.Itoa(n)) }
	minCost := 0
	if e.docsBillable == 0 && e.entriesBillable == 0 {
		minCost = 1 // a query is billed one read even if it reads nothing
	}
	return &pb.ExecutionStats{
		ResultsReturned:   int64(e.results),
		ExecutionDuration: durationpb.New(d),
		ReadOperations:    int64(e.readOps),
		DebugStats: &structpb.Struct{Fields: map[string]*structpb.Value{
			"documents_scanned":     count(e.docsScanned),
			"index_entries_scanned": count(e.entriesScanned),
			"billing_details": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
				"documents_billable":     count(e.docsBillable),
				"index_entries_billable": count(e.entriesBillable),
				"small_ops":              count(0),
				"min_query_cost":         count(minCost),
			}}),
		}},
	}
}

func planSummary(q *query) *pb.PlanSummary {
	var props []string
	for _, o := range q.orders {
		name, dir := nameField, "ASC"
		if o.path != nil {
			name = o.path.String()
		}
		if o.desc {
			dir = "DESC"
		}
		props = append(props, name+" "+dir)
	}
	scope := "Collection"
	if q.allDesc {
		scope = "Collection group"
	}
	return &pb.PlanSummary{IndexesUsed: []*structpb.Struct{{Fields: map[string]*structpb.Value{
		"query_scope": structpb.NewStringValue(scope),
		"properties":  structpb.NewStringValue("(" + strings.Join(props, ", ") + ")"),
	}}}}
}

// runQuery runs q, or, unless execute, only begins the transaction the
// request asks for: Firestore plans a query explained without analyze but
// does not run it, and answers no read time and no documents, which would
// make clients build a result.
func (s *GServer) runQuery(req *pb.RunQueryRequest, q *query, execute bool) ([]*pb.RunQueryResponse, execStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := checkSameDBParent(req.GetParent(), q.db); err != nil {
		return nil, execStats{}, err
	}
	rc, err := s.consistency(q.db, req.GetTransaction(), req.GetNewTransaction(), req.GetReadTime())
	if err != nil {
		return nil, execStats{}, err
	}
	if !execute {
		s.countReads(0) // planning is billed one read
		return []*pb.RunQueryResponse{{Transaction: rc.newTxID}}, execStats{}, nil
	}
	docs, skipped := q.run(q.candidates(rc.db, rc.at))
	s.countReads(len(docs) + skipped) // an offset's documents are read all the same
	if rc.tx != nil {
		// Compiled again from a copy, so the transaction keeps nothing of
		// the request.
		rq, _ := compileQuery(req.GetParent(), cloneQuery(req.GetStructuredQuery()))
		rc.tx.queries = append(rc.tx.queries, recordedQuery{query: rq, result: versionsOf(docs)})
	}
	rt := timestamppb.New(rc.readTime)
	var resps []*pb.RunQueryResponse
	for _, d := range docs {
		resps = append(resps, &pb.RunQueryResponse{Document: q.shape(d), ReadTime: rt})
	}
	if len(resps) == 0 {
		resps = append(resps, &pb.RunQueryResponse{ReadTime: rt})
	}
	resps[0].Transaction = rc.newTxID
	resps[0].SkippedResults = int32(skipped)
	resps[len(resps)-1].ContinuationSelector = &pb.RunQueryResponse_Done{Done: true}
	return resps, queryStats(len(docs), skipped), nil
}

func checkSameDBParent(parent, db string) error {
	if !strings.HasPrefix(parent, db+"/") {
		return status.Errorf(codes.InvalidArgument, "parent %q is not in database %q", parent, db)
	}
	return nil
}

// RunAggregationQuery implements the Firestore RunAggregationQuery RPC with
// count, sum and avg.
func (s *GServer) RunAggregationQuery(req *pb.RunAggregationQueryRequest, stream pb.Firestore_RunAggregationQueryServer) error {
	started := time.Now()
	saq := req.GetStructuredAggregationQuery()
	if saq == nil {
		return status.Errorf(codes.InvalidArgument, "missing structured aggregation query")
	}
	q, err := compileQuery(req.GetParent(), saq.GetStructuredQuery())
	if err != nil {
		return err
	}
	aggs := saq.GetAggregations()
	switch {
	case len(aggs) == 0:
		return status.Errorf(codes.InvalidArgument, "Aggregations can not be empty.")
	case len(aggs) > maxAggregations:
		return status.Errorf(codes.InvalidArgument, "the query has %d aggregations, more than the maximum number of aggregations (%d)", len(aggs), maxAggregations)
	}
	aliases := aggregationAliases(aggs)
	seen := map[string]bool{}
	for i, a := range aggs {
		alias := aliases[i]
		if seen[alias] {
			return status.Errorf(codes.InvalidArgument, "Aggregation aliases contain duplicate alias: %s.", alias)
		}
		seen[alias] = true
		if isReserved(alias) || len(alias) > 1500 {
			return status.Errorf(codes.InvalidArgument, "aggregation alias %q is not a valid field name", alias)
		}
		switch op := a.GetOperator().(type) {
		case *pb.StructuredAggregationQuery_Aggregation_Count_:
			if ut := op.Count.GetUpTo(); ut != nil && ut.GetValue() <= 0 {
				return status.Errorf(codes.InvalidArgument, "count up_to must be positive, got %d", ut.GetValue())
			}
		case *pb.StructuredAggregationQuery_Aggregation_Sum_:
			if _, err := parseFieldPath(op.Sum.GetField().GetFieldPath()); err != nil {
				return err
			}
		case *pb.StructuredAggregationQuery_Aggregation_Avg_:
			if _, err := parseFieldPath(op.Avg.GetField().GetFieldPath()); err != nil {
				return err
			}
		default:
			return status.Errorf(codes.InvalidArgument, "aggregation %q has no operator", alias)
		}
	}
	q.aggregating(aggs)
	eo := req.GetExplainOptions()
	resp, st, err := s.aggregate(req, q, eo == nil || eo.GetAnalyze())
	if err != nil {
		return err
	}
	if eo != nil {
		resp.ExplainMetrics = &pb.ExplainMetrics{PlanSummary: planSummary(q)}
		if eo.GetAnalyze() {
			resp.ExplainMetrics.ExecutionStats = st.proto(time.Since(started))
		}
	}
	return stream.Send(resp)
}

// aggregate runs the aggregation, or, unless execute, only begins the
// transaction the request asks for (see runQuery).
func (s *GServer) aggregate(req *pb.RunAggregationQueryRequest, q *query, execute bool) (*pb.RunAggregationQueryResponse, execStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := checkSameDBParent(req.GetParent(), q.db); err != nil {
		return nil, execStats{}, err
	}
	rc, err := s.consistency(q.db, req.GetTransaction(), req.GetNewTransaction(), req.GetReadTime())
	if err != nil {
		return nil, execStats{}, err
	}
	if !execute {
		s.countReads(0)
		return &pb.RunAggregationQueryResponse{Transaction: rc.newTxID}, execStats{}, nil
	}
	aggs := req.GetStructuredAggregationQuery().GetAggregations()
	docs, _ := q.run(q.candidates(rc.db, rc.at))
	scanned := countScanned(aggs, len(docs))
	s.countReads((scanned + 999) / 1000)
	if rc.tx != nil {
		rq, _ := compileQuery(req.GetParent(), cloneQuery(req.GetStructuredAggregationQuery().GetStructuredQuery()))
		rq.aggregating(aggs)
		rc.tx.queries = append(rc.tx.queries, recordedQuery{query: rq, result: versionsOf(docs)})
	}
	fields := map[string]*pb.Value{}
	aliases := aggregationAliases(aggs)
	for i, a := range aggs {
		alias := aliases[i]
		switch op := a.GetOperator().(type) {
		case *pb.StructuredAggregationQuery_Aggregation_Count_:
			n := int64(len(docs))
			if ut := op.Count.GetUpTo(); ut != nil && n > ut.GetValue() {
				n = ut.GetValue()
			}
			fields[alias] = &pb.Value{ValueType: &pb.Value_IntegerValue{IntegerValue: n}}
		case *pb.StructuredAggregationQuery_Aggregation_Sum_:
			p, _ := parseFieldPath(op.Sum.GetField().GetFieldPath())
			sum, _ := sumField(docs, p)
			fields[alias] = sum
		case *pb.StructuredAggregationQuery_Aggregation_Avg_:
			p, _ := parseFieldPath(op.Avg.GetField().GetFieldPath())
			sum, n := sumField(docs, p)
			if n == 0 {
				fields[alias] = &pb.Value{ValueType: &pb.Value_NullValue{}}
			} else {
				fields[alias] = &pb.Value{ValueType: &pb.Value_DoubleValue{DoubleValue: toFloat(sum) / float64(n)}}
			}
		}
	}
	return &pb.RunAggregationQueryResponse{
		Result:      &pb.AggregationResult{AggregateFields: fields},
		Transaction: rc.newTxID,
		ReadTime:    timestamppb.New(rc.readTime),
	}, aggregationStats(scanned), nil
}

// countScanned is how many of n matching index entries the aggregations
// read: counts with up_to stop there, unless another aggregation reads on.
func countScanned(aggs []*pb.StructuredAggregationQuery_Aggregation, n int) int {
	upTo := 0
	for _, a := range aggs {
		c, ok := a.GetOperator().(*pb.StructuredAggregationQuery_Aggregation_Count_)
		if !ok || c.Count.GetUpTo() == nil {
			return n
		}
		upTo = max(upTo, int(min(c.Count.GetUpTo().GetValue(), math.MaxInt32)))
	}
	return min(n, upTo)
}

// maxAggregations is Firestore's limit on the aggregations of one query.
const maxAggregations = 5

// aggregationAliases returns the alias of each aggregation. Firestore names
// the ones without an alias field_1, field_2, ... counting only those.
func aggregationAliases(aggs []*pb.StructuredAggregationQuery_Aggregation) []string {
	out := make([]string, len(aggs))
	n := 0
	for i, a := range aggs {
		out[i] = a.GetAlias()
		if out[i] == "" {
			n++
			out[i] = "field_" + itoa(n)
		}
	}
	return out
}

// aggregating makes q read what Firestore reads for these aggregations: it
// computes sum and avg from the index of each field they read, so only
// documents holding every such field count (for count too), and a limit
// takes the first documents in the order of those fields.
func (q *query) aggregating(aggs []*pb.StructuredAggregationQuery_Aggregation) {
	var paths []string
	for _, a := range aggs {
		var f string
		switch op := a.GetOperator().(type) {
		case *pb.StructuredAggregationQuery_Aggregation_Sum_:
			f = op.Sum.GetField().GetFieldPath()
		case *pb.StructuredAggregationQuery_Aggregation_Avg_:
			f = op.Avg.GetField().GetFieldPath()
		default:
			continue
		}
		p, err := parseFieldPath(f)
		if err != nil || f == nameField {
			continue
		}
		paths = append(paths, p.String())
	}
	// Like implicit orders on inequality fields: by path, in the direction
	// of the last order.
	sort.Strings(paths)
	desc := q.orders[len(q.orders)-1].desc
	ordered := map[string]bool{}
	for _, o := range q.orders {
		if o.path != nil {
			ordered[o.path.String()] = true
		}
	}
	for _, f := range paths {
		if ordered[f] {
			continue
		}
		ordered[f] = true
		p, _ := parseFieldPath(f)
		q.aggOrders = append(q.aggOrders, order{path: p, desc: desc})
	}
}

// sumField adds the numeric values of a field, skipping other types. The sum
// is an integer while every addend is and it does not overflow; doubles are
// added with compensation so that, like Firestore, 4.8+5.9+6.0+7.1+8.2 is 32.
func sumField(docs []*pb.Document, p fieldPath) (*pb.Value, int) {
	var (
		isum   int64
		ksum   kahan
		double bool
		n      int
	)
	for _, d := range docs {
		switch x := getField(d.Fields, p).GetValueType().(type) {
		case *pb.Value_IntegerValue:
			n++
			s := isum + x.IntegerValue
			overflow := (x.IntegerValue > 0 && s < isum) || (x.IntegerValue < 0 && s > isum)
			if double || overflow {
				double = true
				ksum.add(float64(x.IntegerValue))
				continue
			}
			isum = s
		case *pb.Value_DoubleValue:
			n++
			double = true
			ksum.add(x.DoubleValue)
		}
	}
	if double {
		ksum.add(float64(isum))
		return &pb.Value{ValueType: &pb.Value_DoubleValue{DoubleValue: ksum.sum()}}, n
	}
	return &pb.Value{ValueType: &pb.Value_IntegerValue{IntegerValue: isum}}, n
}

// kahan is Neumaier's compensated summation.
type kahan struct{ s, c float64 }

func (k *kahan) add(x float64) {
	t := k.s + x
	if math.Abs(k.s) >= math.Abs(x) {
		k.c += (k.s - t) + x
	} else {
		k.c += (x - t) + k.s
	}
	k.s = t
}

func (k *kahan) sum() float64 {
	if math.IsInf(k.s, 0) || math.IsNaN(k.s) {
		return k.s
	}
	return k.s + k.c
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// partitionSize is the smallest partition PartitionQuery makes, as Firestore.
const partitionSize = 128

// PartitionQuery implements the Firestore PartitionQuery RPC for collection
// group queries ordered by name: it returns split points at least
// partitionSize documents apart.
func (s *GServer) PartitionQuery(_ context.Context, req *pb.PartitionQueryRequest) (*pb.PartitionQueryResponse, error) {
	sq := req.GetStructuredQuery()
	if sq == nil {
		return nil, status.Errorf(codes.InvalidArgument, "missing structured query")
	}
	if len(sq.GetFrom()) != 1 || !sq.GetFrom()[0].GetAllDescendants() {
		return nil, status.Errorf(codes.InvalidArgument, "partition queries need a collection group query")
	}
	if sq.GetWhere() != nil || sq.GetLimit() != nil || sq.GetOffset() != 0 || sq.GetStartAt() != nil || sq.GetEndAt() != nil {
		return nil, status.Errorf(codes.InvalidArgument, "partition queries support no filter, limit, offset or cursor")
	}
	for _, o := range sq.GetOrderBy() {
		if o.GetField().GetFieldPath() != nameField || o.GetDirection() == pb.StructuredQuery_DESCENDING {
			return nil, status.Errorf(codes.InvalidArgument, "partition queries support only ordering by __name__ ascending")
		}
	}
	if req.GetPartitionCount() < 1 {
		return nil, status.Errorf(codes.InvalidArgument, "partition_count must be positive, got %d", req.GetPartitionCount())
	}
	q, err := compileQuery(req.GetParent(), sq)
	if err != nil {
		return nil, err
	}
	skip := 0
	if tok := req.GetPageToken(); tok != "" {
		for _, c := range tok {
			if c < '0' || c > '9' {
				return nil, status.Errorf(codes.InvalidArgument, "invalid page token %q", tok)
			}
			skip = skip*10 + int(c-'0')
		}
	}
	s.mu.Lock()
	var at time.Time
	if rt := req.GetReadTime(); rt != nil {
		if at, err = s.checkReadTime(rt); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	docs, _ := q.run(q.candidates(s.database(q.db), at))
	s.mu.Unlock()
	chunk := max(partitionSize, (len(docs)+int(req.GetPartitionCount())-1)/int(req.GetPartitionCount()))
	var cursors []*pb.Cursor
	for i := chunk; i < len(docs) && int64(len(cursors)) < req.GetPartitionCount()-1; i += chunk {
		cursors = append(cursors, &pb.Cursor{Values: []*pb.Value{{ValueType: &pb.Value_ReferenceValue{ReferenceValue: docs[i].Name}}}})
	}
	resp := &pb.PartitionQueryResponse{}
	if skip < len(cursors) {
		cursors = cursors[skip:]
	} else {
		cursors = nil
	}
	if ps := int(req.GetPageSize()); ps > 0 && len(cursors) > ps {
		cursors = cursors[:ps]
		resp.NextPageToken = itoa(skip + ps)
	}
	resp.Partitions = cursors
	return resp, nil
}
