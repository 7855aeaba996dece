package firestore

import (
	"math"
	"sort"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxNearestLimit is Firestore's limit on the results of a vector search.
const maxNearestLimit = 1000

// nearest is a validated find_nearest stage.
type nearest struct {
	field     fieldPath
	query     []float64
	measure   pb.StructuredQuery_FindNearest_DistanceMeasure
	limit     int
	result    fieldPath // where to store the distance; nil for nowhere
	threshold *float64
}

func (q *query) compileNearest(fn *pb.StructuredQuery_FindNearest) error {
	n := &nearest{measure: fn.GetDistanceMeasure()}
	var err error
	if n.field, err = parseFieldPath(fn.GetVectorField().GetFieldPath()); err != nil {
		return err
	}
	qv, ok := vectorOf(fn.GetQueryVector())
	if !ok || len(qv) == 0 {
		return status.Errorf(codes.InvalidArgument, "find_nearest needs a non-empty vector as query vector")
	}
	n.query = qv
	switch n.measure {
	case pb.StructuredQuery_FindNearest_EUCLIDEAN, pb.StructuredQuery_FindNearest_COSINE, pb.StructuredQuery_FindNearest_DOT_PRODUCT:
	default:
		return status.Errorf(codes.InvalidArgument, "find_nearest needs a distance measure")
	}
	l := fn.GetLimit()
	if l == nil || l.GetValue() <= 0 || l.GetValue() > maxNearestLimit {
		return status.Errorf(codes.InvalidArgument, "find_nearest limit must be between 1 and %d", maxNearestLimit)
	}
	n.limit = int(l.GetValue())
	if f := fn.GetDistanceResultField(); f != "" {
		if n.result, err = parseFieldPath(f); err != nil {
			return err
		}
	}
	if t := fn.GetDistanceThreshold(); t != nil {
		v := t.GetValue()
		n.threshold = &v
	}
	q.nearest = n
	return nil
}

// vectorOf decodes a vector value (a map with __type__ "__vector__").
func vectorOf(v *pb.Value) ([]float64, bool) {
	m := v.GetMapValue()
	if m == nil || !isVector(m) {
		return nil, false
	}
	arr, ok := m.GetFields()["value"].GetValueType().(*pb.Value_ArrayValue)
	if !ok {
		return nil, false
	}
	out := make([]float64, 0, len(arr.ArrayValue.GetValues()))
	for _, e := range arr.ArrayValue.GetValues() {
		if !isNumber(e) {
			return nil, false
		}
		out = append(out, toFloat(e))
	}
	return out, true
}

// run ranks the documents (already filtered) by distance to the query
// vector. Documents whose field is not a vector of the query's dimension are
// skipped. It returns copies when the distance is stored in a field.
func (n *nearest) run(docs []*pb.Document) []*pb.Document {
	type scored struct {
		doc  *pb.Document
		dist float64
	}
	var res []scored
	for _, d := range docs {
		v, ok := vectorOf(getField(d.Fields, n.field))
		if !ok || len(v) != len(n.query) {
			continue
		}
		dist := n.distance(v)
		if math.IsNaN(dist) {
			continue
		}
		if t := n.threshold; t != nil {
			if n.measure == pb.StructuredQuery_FindNearest_DOT_PRODUCT && dist < *t {
				continue
			}
			if n.measure != pb.StructuredQuery_FindNearest_DOT_PRODUCT && dist > *t {
				continue
			}
		}
		res = append(res, scored{d, dist})
	}
	sort.SliceStable(res, func(i, j int) bool {
		if n.measure == pb.StructuredQuery_FindNearest_DOT_PRODUCT {
			return res[i].dist > res[j].dist
		}
		return res[i].dist < res[j].dist
	})
	if len(res) > n.limit {
		res = res[:n.limit]
	}
	out := make([]*pb.Document, len(res))
	for i, r := range res {
		out[i] = r.doc
		if n.result != nil {
			c := cloneDoc(r.doc)
			if c.Fields == nil {
				c.Fields = map[string]*pb.Value{}
			}
			setField(c.Fields, n.result, &pb.Value{ValueType: &pb.Value_DoubleValue{DoubleValue: r.dist}})
			out[i] = c
		}
	}
	return out
}

func (n *nearest) distance(v []float64) float64 {
	var dot, nq, nv, sq float64
	for i, x := range v {
		y := n.query[i]
		dot += x * y
		nq += y * y
		nv += x * x
		sq += (x - y) * (x - y)
	}
	switch n.measure {
	case pb.StructuredQuery_FindNearest_EUCLIDEAN:
		return math.Sqrt(sq)
	case pb.StructuredQuery_FindNearest_COSINE:
		if nq == 0 || nv == 0 {
			return math.NaN()
		}
		return 1 - dot/(math.Sqrt(nq)*math.Sqrt(nv))
	}
	return dot
}
