package firestore

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	gfs "cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// seedQueryDocs writes a small collection with values of every type.
func seedQueryDocs(t *testing.T, c *gfs.Client) *gfs.CollectionRef {
	t.Helper()
	ctx := testCtx(t)
	coll := c.Collection("items")
	docs := map[string]map[string]any{
		"a": {"n": 1, "s": "apple", "tags": []any{"red", "fruit"}, "nested": map[string]any{"x": 1}, "dotted.key": 1},
		"b": {"n": 2.5, "s": "banana", "tags": []any{"yellow", "fruit"}, "nested": map[string]any{"x": 2}},
		"c": {"n": 3, "s": "cherry", "tags": []any{"red"}, "opt": nil},
		"d": {"n": math.NaN(), "s": "date"},
		"e": {"s": "elder", "opt": "set"},
		"f": {"n": "ten", "s": "fig"},
	}
	for id, data := range docs {
		if _, err := coll.Doc(id).Set(ctx, data); err != nil {
			t.Fatalf("Set(%s): %v", id, err)
		}
	}
	return coll
}

func ids(snaps []*gfs.DocumentSnapshot) []string {
	out := make([]string, len(snaps))
	for i, s := range snaps {
		out[i] = s.Ref.ID
	}
	return out
}

func TestQueries(t *testing.T) {
	_, c := newTestServer(t)
	coll := seedQueryDocs(t, c)
	ctx := testCtx(t)
	for _, tc := range []struct {
		desc string
		q    gfs.Query
		want []string
	}{
		{"equal int matches double-typed equal", coll.Where("n", "==", 1.0), []string{"a"}},
		{"not equal excludes missing and null", coll.Where("opt", "!=", "x"), []string{"e"}},
		{"less than only numbers, never NaN", coll.Where("n", "<", 3), []string{"a", "b"}},
		{"less or equal", coll.Where("n", "<=", 3), []string{"a", "b", "c"}},
		{"greater than", coll.Where("n", ">", 1), []string{"b", "c"}},
		{"greater or equal", coll.Where("n", ">=", 2.5), []string{"b", "c"}},
		{"string range", coll.Where("s", ">=", "c").Where("s", "<", "e"), []string{"c", "d"}},
		{"in", coll.Where("s", "in", []string{"fig", "apple", "zzz"}), []string{"a", "f"}},
		{"not in", coll.Where("s", "not-in", []string{"apple", "banana"}), []string{"c", "d", "e", "f"}},
		{"array contains", coll.Where("tags", "array-contains", "red"), []string{"a", "c"}},
		{"array contains any", coll.Where("tags", "array-contains-any", []string{"yellow", "red"}), []string{"a", "b", "c"}},
		{"is nan", coll.Where("n", "==", math.NaN()), []string{"d"}},
		{"is null", coll.Where("opt", "==", nil), []string{"c"}},
		{"is not nan", coll.Where("n", "!=", math.NaN()), []string{"a", "b", "c", "f"}},
		{"is not null", coll.Where("opt", "!=", nil), []string{"e"}},
		{"nested field", coll.Where("nested.x", "==", 2), []string{"b"}},
		{"backquoted field", coll.WherePath(gfs.FieldPath{"dotted.key"}, "==", 1), []string{"a"}},
		{"or", coll.WhereEntity(gfs.OrFilter{Filters: []gfs.EntityFilter{
			gfs.PropertyFilter{Path: "s", Operator: "==", Value: "apple"},
			gfs.PropertyFilter{Path: "n", Operator: ">", Value: 2},
		}}), []string{"a", "b", "c"}},
		{"nested and inside or", coll.WhereEntity(gfs.OrFilter{Filters: []gfs.EntityFilter{
			gfs.AndFilter{Filters: []gfs.EntityFilter{
				gfs.PropertyFilter{Path: "tags", Operator: "array-contains", Value: "red"},
				gfs.PropertyFilter{Path: "n", Operator: "==", Value: 3},
			}},
			gfs.PropertyFilter{Path: "s", Operator: "==", Value: "elder"},
		}}), []string{"c", "e"}},
		{"order across types", coll.OrderBy("n", gfs.Asc), []string{"d", "a", "b", "c", "f"}},
		{"order desc", coll.OrderBy("s", gfs.Desc).Limit(2), []string{"f", "e"}},
		{"offset and limit", coll.OrderBy("s", gfs.Asc).Offset(1).Limit(2), []string{"b", "c"}},
		{"limit to last", coll.OrderBy("s", gfs.Asc).LimitToLast(2), []string{"e", "f"}},
		{"start at", coll.OrderBy("s", gfs.Asc).StartAt("cherry"), []string{"c", "d", "e", "f"}},
		{"start after", coll.OrderBy("s", gfs.Asc).StartAfter("cherry"), []string{"d", "e", "f"}},
		{"end at", coll.OrderBy("s", gfs.Asc).EndAt("banana"), []string{"a", "b"}},
		{"end before", coll.OrderBy("s", gfs.Asc).EndBefore("banana"), []string{"a"}},
		{"cursor on name", coll.OrderBy(gfs.DocumentID, gfs.Asc).StartAfter("d"), []string{"e", "f"}},
		{"implicit name order", coll.Where("tags", "array-contains", "fruit"), []string{"a", "b"}},
		{"inequality field orders implicitly and excludes documents lacking it", coll.WhereEntity(gfs.OrFilter{Filters: []gfs.EntityFilter{
			gfs.PropertyFilter{Path: "n", Operator: ">", Value: 2},
			gfs.PropertyFilter{Path: "s", Operator: "==", Value: "elder"},
		}}), []string{"b", "c"}},
		{"missing ordered field excludes", coll.OrderBy("opt", gfs.Asc), []string{"c", "e"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			snaps, err := tc.q.Documents(ctx).GetAll()
			if err != nil {
				t.Fatalf("GetAll: %v", err)
			}
			if got := ids(snaps); !slices.Equal(got, tc.want) {
				t.Errorf("query = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestQueryProjectionAndCollectionGroup(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	coll := seedQueryDocs(t, c)
	snaps, err := coll.Select("s").Where("s", "==", "apple").Documents(ctx).GetAll()
	if err != nil || len(snaps) != 1 {
		t.Fatalf("Select = %d docs, %v; want 1", len(snaps), err)
	}
	if got := snaps[0].Data(); len(got) != 1 || got["s"] != "apple" {
		t.Errorf("projected data = %v, want only s=apple", got)
	}
	for _, p := range []string{"x/1/items/z", "y/2/items/y", "y/2/other/w"} {
		if _, err := c.Doc(p).Set(ctx, map[string]any{"g": 1}); err != nil {
			t.Fatalf("Set(%s): %v", p, err)
		}
	}
	snaps, err = c.CollectionGroup("items").Where("g", "==", 1).Documents(ctx).GetAll()
	if err != nil {
		t.Fatalf("collection group: %v", err)
	}
	if got, want := ids(snaps), []string{"z", "y"}; !slices.Equal(got, want) {
		t.Errorf("collection group = %v, want %v", got, want)
	}
}

func TestQueryInvalid(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	coll := c.Collection("items")
	many := make([]int, 31)
	for _, tc := range []struct {
		desc string
		q    gfs.Query
	}{
		{"in with too many values", coll.Where("n", "in", many)},
		{"not-in with too many values", coll.Where("n", "not-in", many)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := tc.q.Documents(ctx).GetAll()
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("GetAll = %v, want InvalidArgument", err)
			}
		})
	}
}

func TestAggregations(t *testing.T) {
	_, c := newTestServer(t)
	coll := seedQueryDocs(t, c)
	ctx := testCtx(t)
	for _, tc := range []struct {
		desc string
		q    *gfs.AggregationQuery
		want map[string]any
	}{
		{"count", agg(coll.Query).WithCount("all"), map[string]any{"all": int64(6)}},
		{"count up to", agg(coll.Where("s", ">", "a").Limit(3)).WithCount("c"), map[string]any{"c": int64(3)}},
		{"sum ints", agg(coll.Where("n", "in", []int{1, 3})).WithSum("n", "total"), map[string]any{"total": int64(4)}},
		{"sum mixed", agg(coll.Where("n", ">=", 1)).WithSum("n", "total").WithAvg("n", "mean"), map[string]any{"total": 6.5, "mean": 6.5 / 3}},
		{"avg of nothing", agg(coll.Where("s", "==", "none")).WithAvg("n", "mean").WithSum("n", "total"), map[string]any{"mean": nil, "total": int64(0)}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := tc.q.Get(ctx)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			for k, want := range tc.want {
				g := got[k]
				if !aggEqual(g, want) {
					t.Errorf("aggregation %s = %v (%T), want %v", k, g, g, want)
				}
			}
		})
	}
}

func agg(q gfs.Query) *gfs.AggregationQuery { return q.NewAggregationQuery() }

// aggEqual compares an aggregation result value with an int64, float64 or
// nil.
func aggEqual(got, want any) bool {
	v, ok := got.(*pb.Value)
	if !ok {
		return false
	}
	switch w := want.(type) {
	case int64:
		x, ok := v.GetValueType().(*pb.Value_IntegerValue)
		return ok && x.IntegerValue == w
	case float64:
		x, ok := v.GetValueType().(*pb.Value_DoubleValue)
		return ok && math.Abs(x.DoubleValue-w) < 1e-9
	case nil:
		return isNull(v)
	}
	return false
}

func TestQueryInTransactionAndReadTime(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	coll := seedQueryDocs(t, c)
	before := time.Now()
	time.Sleep(2 * time.Millisecond) // read times are compared at microsecond precision
	if _, err := coll.Doc("g").Set(ctx, map[string]any{"s": "grape"}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	old, err := coll.WithReadOptions(gfs.ReadTime(before)).Documents(ctx).GetAll()
	if err != nil {
		t.Fatalf("query at read time: %v", err)
	}
	if len(old) != 6 {
		t.Errorf("query at read time = %d docs, want 6", len(old))
	}
	var n int
	err = c.RunTransaction(ctx, func(ctx context.Context, tx *gfs.Transaction) error {
		docs, err := tx.Documents(coll).GetAll()
		n = len(docs)
		return err
	}, gfs.ReadOnly)
	if err != nil {
		t.Fatalf("RunTransaction: %v", err)
	}
	if n != 7 {
		t.Errorf("query in read-only transaction = %d docs, want 7", n)
	}
}

// Firestore's range filters never match NaN, though NaN orders before
// every other number; only == NaN finds it.
func TestRangeFiltersNeverMatchNaN(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	coll := c.Collection("nan")
	for id, v := range map[string]any{"nan": math.NaN(), "zero": 0, "one": 1.0, "inf": math.Inf(-1)} {
		if _, err := coll.Doc(id).Set(ctx, map[string]any{"v": v}); err != nil {
			t.Fatalf("Set(%s): %v", id, err)
		}
	}
	for _, tc := range []struct {
		desc string
		q    gfs.Query
		want []string
	}{
		{"less than", coll.Where("v", "<", 1), []string{"inf", "zero"}},
		{"less or equal", coll.Where("v", "<=", 1), []string{"inf", "zero", "one"}},
		{"greater than", coll.Where("v", ">", math.Inf(-1)), []string{"zero", "one"}},
		{"greater or equal", coll.Where("v", ">=", math.Inf(-1)), []string{"inf", "zero", "one"}},
		{"equal NaN", coll.Where("v", "==", math.NaN()), []string{"nan"}},
		{"ordered, NaN first", coll.OrderBy("v", gfs.Asc), []string{"nan", "inf", "zero", "one"}},
		{"cursor before -Infinity", coll.OrderBy("v", gfs.Asc).EndBefore(math.Inf(-1)), []string{"nan"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			snaps, err := tc.q.Documents(ctx).GetAll()
			if err != nil {
				t.Fatalf("GetAll: %v", err)
			}
			if got := ids(snaps); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
