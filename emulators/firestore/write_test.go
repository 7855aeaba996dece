package firestore

import (
	"strings"
	"testing"
	"time"

	gfs "cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	testingclock "k8s.io/utils/clock/testing"
)

func TestWrites(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	doc := c.Doc("w/doc")
	for _, tc := range []struct {
		desc  string
		write func() error
		want  map[string]any // nil: the document must not exist
	}{
		{"set", func() error {
			_, err := doc.Set(ctx, map[string]any{"a": 1, "m": map[string]any{"x": 1, "y.z": 2}})
			return err
		}, map[string]any{"a": int64(1), "m": map[string]any{"x": int64(1), "y.z": int64(2)}}},
		{"update nested and backquoted paths", func() error {
			_, err := doc.Update(ctx, []gfs.Update{{Path: "m.x", Value: 5}, {FieldPath: gfs.FieldPath{"m", "y.z"}, Value: 3}, {Path: "a", Value: gfs.Delete}})
			return err
		}, map[string]any{"m": map[string]any{"x": int64(5), "y.z": int64(3)}}},
		{"set merge", func() error {
			_, err := doc.Set(ctx, map[string]any{"m": map[string]any{"w": true}}, gfs.MergeAll)
			return err
		}, map[string]any{"m": map[string]any{"x": int64(5), "y.z": int64(3), "w": true}}},
		{"transforms", func() error {
			_, err := doc.Update(ctx, []gfs.Update{
				{Path: "inc", Value: gfs.Increment(2)},
				{Path: "max", Value: gfs.FieldTransformMaximum(7)},
				{Path: "min", Value: gfs.FieldTransformMinimum(-1)},
				{Path: "arr", Value: gfs.ArrayUnion("a", "b", "a")},
			})
			return err
		}, map[string]any{"m": map[string]any{"x": int64(5), "y.z": int64(3), "w": true}, "inc": int64(2), "max": int64(7), "min": int64(-1), "arr": []any{"a", "b"}}},
		{"transforms on existing values", func() error {
			_, err := doc.Update(ctx, []gfs.Update{
				{Path: "inc", Value: gfs.Increment(0.5)},
				{Path: "max", Value: gfs.FieldTransformMaximum(3)},
				{Path: "min", Value: gfs.FieldTransformMinimum(-2)},
				{Path: "arr", Value: gfs.ArrayRemove("a")},
				{Path: "m", Value: gfs.Delete},
			})
			return err
		}, map[string]any{"inc": 2.5, "max": int64(7), "min": int64(-2), "arr": []any{"b"}}},
		{"delete", func() error {
			_, err := doc.Delete(ctx)
			return err
		}, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if err := tc.write(); err != nil {
				t.Fatalf("write: %v", err)
			}
			snap, err := doc.Get(ctx)
			if tc.want == nil {
				if status.Code(err) != codes.NotFound {
					t.Fatalf("Get = %v, want NotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got := snap.Data(); !equalData(got, tc.want) {
				t.Errorf("Get = %v, want %v", got, tc.want)
			}
		})
	}
}

func equalData(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if !equalData(x[k], y[k]) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalData(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

func TestServerTimestampAndCommitTimes(t *testing.T) {
	fixed := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	_, c := newTestServer(t, WithClock(testingclock.NewFakePassiveClock(fixed)))
	ctx := testCtx(t)
	var last time.Time
	for i := range 3 {
		wr, err := c.Doc("t/doc").Set(ctx, map[string]any{"at": gfs.ServerTimestamp, "i": i})
		if err != nil {
			t.Fatalf("Set: %v", err)
		}
		if !wr.UpdateTime.After(last) {
			t.Errorf("commit %d time %v is not after %v", i, wr.UpdateTime, last)
		}
		last = wr.UpdateTime
		snap, err := c.Doc("t/doc").Get(ctx)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if got := snap.Data()["at"].(time.Time); !got.Equal(wr.UpdateTime) {
			t.Errorf("server timestamp = %v, want the commit time %v", got, wr.UpdateTime)
		}
	}
	if want := fixed.Add(2 * time.Microsecond); !last.Equal(want) {
		t.Errorf("third commit time with a frozen clock = %v, want %v", last, want)
	}
	// One batch: every write gets the same commit time.
	b := c.Batch()
	b.Set(c.Doc("t/x"), map[string]any{"v": 1})
	b.Set(c.Doc("t/y"), map[string]any{"v": 2})
	res, err := b.Commit(ctx)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if !res[0].UpdateTime.Equal(res[1].UpdateTime) {
		t.Errorf("batch update times %v and %v differ", res[0].UpdateTime, res[1].UpdateTime)
	}
}

func TestWritePreconditions(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	doc := c.Doc("p/doc")
	wr, err := doc.Create(ctx, map[string]any{"v": 1})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	for _, tc := range []struct {
		desc  string
		write func() error
		want  codes.Code
	}{
		{"create existing", func() error { _, err := doc.Create(ctx, map[string]any{"v": 2}); return err }, codes.AlreadyExists},
		{"update missing", func() error {
			_, err := c.Doc("p/none").Update(ctx, []gfs.Update{{Path: "v", Value: 1}})
			return err
		}, codes.NotFound},
		{"update with stale update time", func() error {
			_, err := doc.Update(ctx, []gfs.Update{{Path: "v", Value: 3}}, gfs.LastUpdateTime(wr.UpdateTime.Add(-time.Microsecond)))
			return err
		}, codes.FailedPrecondition},
		{"update with current update time", func() error {
			_, err := doc.Update(ctx, []gfs.Update{{Path: "v", Value: 3}}, gfs.LastUpdateTime(wr.UpdateTime))
			return err
		}, codes.OK},
		{"delete missing with exists", func() error { _, err := c.Doc("p/none").Delete(ctx, gfs.Exists); return err }, codes.NotFound},
		{"oversized document", func() error {
			_, err := c.Doc("p/big").Set(ctx, map[string]any{"s": strings.Repeat("x", 1<<20)})
			return err
		}, codes.InvalidArgument},
		{"reserved field name", func() error { _, err := c.Doc("p/r").Set(ctx, map[string]any{"__x__": 1}); return err }, codes.InvalidArgument},
		{"too many writes", func() error {
			b := c.Batch()
			for i := range 501 {
				b.Set(c.Collection("many").Doc(string(rune('a'+i%26))+strings.Repeat("z", i/26)), map[string]any{"i": i})
			}
			_, err := b.Commit(ctx)
			return err
		}, codes.InvalidArgument},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if err := tc.write(); status.Code(err) != tc.want {
				t.Errorf("write = %v, want code %v", err, tc.want)
			}
		})
	}
}

func TestBulkWriter(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	if _, err := c.Doc("bw/exists").Set(ctx, map[string]any{"v": 1}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	bw := c.BulkWriter(ctx)
	ok, err := bw.Create(c.Doc("bw/new"), map[string]any{"v": 1})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	dup, err := bw.Create(c.Doc("bw/exists"), map[string]any{"v": 2})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	bw.End()
	if _, err := ok.Results(); err != nil {
		t.Errorf("Create(bw/new) = %v, want success", err)
	}
	if _, err := dup.Results(); status.Code(err) != codes.AlreadyExists {
		t.Errorf("Create(bw/exists) = %v, want AlreadyExists", err)
	}
}

func TestCollectionsAndListDocuments(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	for _, p := range []string{"top/a", "top/b/sub1/x", "top/c/sub2/y", "top/c/sub1/z"} {
		if _, err := c.Doc(p).Set(ctx, map[string]any{"v": 1}); err != nil {
			t.Fatalf("Set(%s): %v", p, err)
		}
	}
	refs, err := c.Collection("top").DocumentRefs(ctx).GetAll()
	if err != nil {
		t.Fatalf("DocumentRefs: %v", err)
	}
	var got []string
	for _, r := range refs {
		got = append(got, r.ID)
	}
	if want := "a b c"; strings.Join(got, " ") != want {
		t.Errorf("DocumentRefs = %v, want %s (missing parents included)", got, want)
	}
	cols, err := c.Doc("top/c").Collections(ctx).GetAll()
	if err != nil {
		t.Fatalf("Collections: %v", err)
	}
	got = nil
	for _, col := range cols {
		got = append(got, col.ID)
	}
	if want := "sub1 sub2"; strings.Join(got, " ") != want {
		t.Errorf("Collections(top/c) = %v, want %s", got, want)
	}
}
