package firestore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	gfs "cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/types/known/timestamppb"
	testingclock "k8s.io/utils/clock/testing"
)

// A query finds its documents through the database's indexes by collection
// and collection ID; these tests check the scopes that the indexes must
// reproduce, and that the indexes follow the documents.

// TestQueryScopeUnderDocument checks collection, collection group and
// kindless queries whose parent is a document, next to documents whose
// paths share a prefix with it.
func TestQueryScopeUnderDocument(t *testing.T) {
	srv, c := newTestServer(t)
	raw := newRawClient(t, srv)
	setDocs(t, c, map[string]map[string]any{
		"A/a1":            {"v": 1},
		"A/a1/sub/s1":     {"v": 1},
		"A/a1/x/y":        {"v": 1},
		"A/a1/x/y/sub/s2": {"v": 1},
		"A/a1/other/o1":   {"v": 1},
		"A/a10/sub/s3":    {"v": 1}, // a10 starts with a1
		"A/a2/sub/s4":     {"v": 1},
		"sub/s5":          {"v": 1},
		"B/a1/sub/s6":     {"v": 1},
	})
	for _, tc := range []struct {
		desc    string
		from    *pb.StructuredQuery_CollectionSelector
		want    []string
		wantAll []string // the same query under the root, if different
	}{
		{"collection", &pb.StructuredQuery_CollectionSelector{CollectionId: "sub"},
			[]string{"A/a1/sub/s1"}, []string{"sub/s5"}},
		{"collection group", &pb.StructuredQuery_CollectionSelector{CollectionId: "sub", AllDescendants: true},
			[]string{"A/a1/sub/s1", "A/a1/x/y/sub/s2"},
			[]string{"A/a1/sub/s1", "A/a1/x/y/sub/s2", "A/a10/sub/s3", "A/a2/sub/s4", "B/a1/sub/s6", "sub/s5"}},
		{"kindless", &pb.StructuredQuery_CollectionSelector{AllDescendants: true},
			[]string{"A/a1/other/o1", "A/a1/sub/s1", "A/a1/x/y", "A/a1/x/y/sub/s2"},
			[]string{"A/a1", "A/a1/other/o1", "A/a1/sub/s1", "A/a1/x/y", "A/a1/x/y/sub/s2", "A/a10/sub/s3", "A/a2/sub/s4", "B/a1/sub/s6", "sub/s5"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := testCtx(t)
			for parent, want := range map[string][]string{"/A/a1": tc.want, "": tc.wantAll} {
				got, err := rawRunQuery(ctx, raw, &pb.RunQueryRequest{
					Parent:    testDB + "/documents" + parent,
					QueryType: &pb.RunQueryRequest_StructuredQuery{StructuredQuery: &pb.StructuredQuery{From: []*pb.StructuredQuery_CollectionSelector{tc.from}}},
				})
				if err != nil {
					t.Fatalf("RunQuery under %q: %v", parent, err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("under %q: got %v, want %v", parent, got, want)
				}
			}
		})
	}
}

// TestQueryReadTimeDeletedAndRecreated checks that a query at a read time
// finds a document deleted since, does not find it between its deletion
// and its re-creation, and finds the right version each time.
func TestQueryReadTimeDeletedAndRecreated(t *testing.T) {
	srv, c := newTestServer(t)
	raw := newRawClient(t, srv)
	ctx := testCtx(t)
	setDocs(t, c, map[string]map[string]any{"k/a": {"v": 1}, "k/b": {"v": 1}, "g/x/items/i": {"v": 1}})
	tick := func() time.Time {
		time.Sleep(2 * time.Millisecond) // read times are compared at microsecond precision
		t := time.Now()
		time.Sleep(2 * time.Millisecond)
		return t
	}
	created := tick()
	for _, p := range []string{"k/a", "g/x/items/i"} {
		if _, err := c.Doc(p).Delete(ctx); err != nil {
			t.Fatalf("Delete(%s): %v", p, err)
		}
	}
	deleted := tick()
	setDocs(t, c, map[string]map[string]any{"k/a": {"v": 2}, "g/x/items/i": {"v": 2}})
	for _, tc := range []struct {
		desc string
		at   time.Time // zero: now
		want []string  // path=v
	}{
		{"before the deletion", created, []string{"g/x/items/i=1", "k/a=1", "k/b=1"}},
		{"after the deletion", deleted, []string{"k/b=1"}},
		{"after the re-creation", time.Time{}, []string{"g/x/items/i=2", "k/a=2", "k/b=1"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var got []string
			for _, q := range []gfs.Query{c.Collection("k").Query, c.CollectionGroup("items").Query} {
				if !tc.at.IsZero() {
					q = *q.WithReadOptions(gfs.ReadTime(tc.at))
				}
				docs, err := q.Documents(ctx).GetAll()
				if err != nil {
					t.Fatalf("query: %v", err)
				}
				for _, d := range docs {
					got = append(got, d.Ref.Path[len(testDB+"/documents/"):]+"="+fmt.Sprint(d.Data()["v"]))
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("list documents and collections", func(t *testing.T) {
		// Only g/x/items/i is below g/x, so g/x is listed while it exists.
		for _, tc := range []struct {
			at          time.Time
			docs, colls []string
		}{
			{created, []string{"g/x"}, []string{"items"}},
			{deleted, nil, nil},
			{time.Time{}, []string{"g/x"}, []string{"items"}},
		} {
			var rt *timestamppb.Timestamp
			if !tc.at.IsZero() {
				rt = timestamppb.New(tc.at)
			}
			ld := &pb.ListDocumentsRequest{Parent: testDB + "/documents", CollectionId: "g", ShowMissing: true}
			lc := &pb.ListCollectionIdsRequest{Parent: testDB + "/documents/g/x"}
			if rt != nil {
				ld.ConsistencySelector = &pb.ListDocumentsRequest_ReadTime{ReadTime: rt}
				lc.ConsistencySelector = &pb.ListCollectionIdsRequest_ReadTime{ReadTime: rt}
			}
			var docs, colls []string
			for it := raw.ListDocuments(ctx, ld); ; {
				d, err := it.Next()
				if errors.Is(err, iterator.Done) {
					break
				}
				if err != nil {
					t.Fatalf("ListDocuments: %v", err)
				}
				docs = append(docs, d.Name[len(testDB+"/documents/"):])
			}
			for it := raw.ListCollectionIds(ctx, lc); ; {
				id, err := it.Next()
				if errors.Is(err, iterator.Done) {
					break
				}
				if err != nil {
					t.Fatalf("ListCollectionIds: %v", err)
				}
				colls = append(colls, id)
			}
			if !slices.Equal(docs, tc.docs) || !slices.Equal(colls, tc.colls) {
				t.Errorf("at %v: ListDocuments(g) = %v, ListCollectionIds(g/x) = %v; want %v and %v", tc.at, docs, colls, tc.docs, tc.colls)
			}
		}
	})
}

// TestCollectionGroupPhantomRetries checks that a collection group query
// in a read-write transaction is checked again at commit, with a document
// added under another parent.
func TestCollectionGroupPhantomRetries(t *testing.T) {
	srv, c := newTestServer(t)
	other := newClient(t, srv, "test-project")
	ctx := testCtx(t)
	setDocs(t, c, map[string]map[string]any{"p/1/jobs/j1": {"state": "queued"}})
	attempts, seen := 0, 0
	err := c.RunTransaction(ctx, func(ctx context.Context, tx *gfs.Transaction) error {
		attempts++
		docs, err := tx.Documents(c.CollectionGroup("jobs").Where("state", "==", "queued")).GetAll()
		if err != nil {
			return err
		}
		seen = len(docs)
		if attempts == 1 {
			if _, err := other.Doc("p/2/jobs/j2").Create(ctx, map[string]any{"state": "queued"}); err != nil {
				return err
			}
		}
		return tx.Set(c.Doc("summary/jobs"), map[string]any{"queued": len(docs)})
	})
	if err != nil {
		t.Fatalf("RunTransaction: %v", err)
	}
	if attempts != 2 || seen != 2 {
		t.Errorf("attempts = %d, seen = %d; want 2 and 2 (the first commit must abort)", attempts, seen)
	}
}

// TestIndexFollowsDocuments checks, after creations, deletions,
// re-creations, seeding and import, that the indexes hold exactly the
// entries of the documents.
func TestIndexFollowsDocuments(t *testing.T) {
	srv, c := newTestServer(t)
	ctx := testCtx(t)
	setDocs(t, c, map[string]map[string]any{"a/1": {}, "a/2": {}, "a/1/b/1": {}, "c/1/b/2": {}, "d/1": {}})
	for _, p := range []string{"a/2", "c/1/b/2", "never/there"} {
		if _, err := c.Doc(p).Delete(ctx); err != nil {
			t.Fatalf("Delete(%s): %v", p, err)
		}
	}
	setDocs(t, c, map[string]map[string]any{"a/2": {"v": 2}})
	if err := srv.SetDocument(&pb.Document{Name: testDB + "/documents/d/1"}); err != nil {
		t.Fatalf("SetDocument: %v", err)
	}
	if err := srv.SetDocument(&pb.Document{Name: testDB + "/documents/e/1/b/3"}); err != nil {
		t.Fatalf("SetDocument: %v", err)
	}
	checkIndex(t, srv)
}

// checkIndex rebuilds the indexes of every database from its documents and
// compares them with the stored ones.
func checkIndex(t *testing.T, srv *Server) {
	t.Helper()
	g := srv.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, d := range g.dbs {
		want := newDatabase(name)
		for path, e := range d.docs {
			want.add(path, e)
		}
		for _, idx := range []struct {
			name      string
			got, want map[string]map[string]*docEntry
		}{{"byCollection", d.byCollection, want.byCollection}, {"byCollectionID", d.byCollectionID, want.byCollectionID}} {
			if !maps.EqualFunc(idx.got, idx.want, func(a, b map[string]*docEntry) bool { return maps.Equal(a, b) }) {
				t.Errorf("%s: %s = %v, want %v", name, idx.name, slices.Sorted(maps.Keys(idx.got)), slices.Sorted(maps.Keys(idx.want)))
			}
		}
	}
}

// TestScopeMatchesScan compares, on random documents, the entries a scope
// finds through the indexes with those a scan of every document finds.
func TestScopeMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []string{"a", "b", "a1", "ab"}
	d := newDatabase(testDB)
	var paths []string
	start := time.Now()
	for i := range 2000 {
		segs := make([]string, 2*(1+rng.IntN(3)))
		for j := range segs {
			segs[j] = ids[rng.IntN(len(ids))]
		}
		path := strings.Join(segs, "/")
		var doc *pb.Document
		if rng.IntN(3) > 0 {
			doc = &pb.Document{Name: testDB + "/documents/" + path}
		}
		d.put(path, start.Add(time.Duration(i)*time.Millisecond), doc, start)
		paths = append(paths, path)
	}
	checked := 0
	for _, parent := range append([]string{"", "a", "a/a1/b"}, paths...) {
		for _, collID := range append([]string{""}, ids...) {
			for _, allDesc := range []bool{false, true} {
				var want []string
				for path := range d.docs {
					if inScope(path, parent, collID, allDesc) {
						want = append(want, path)
					}
				}
				got := slices.Collect(maps.Keys(maps.Collect(d.scope(parent, collID, allDesc))))
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("scope(%q, %q, %v) = %v, want %v", parent, collID, allDesc, got, want)
				}
				checked += len(want)
			}
		}
	}
	if checked == 0 {
		t.Fatalf("no scope held a document")
	}
}

// TestDeletedDocumentsExpire checks that a deleted document stays (for
// reads at an earlier time) while its deletion is inside the retention
// window, and leaves the database and its indexes after.
func TestDeletedDocumentsExpire(t *testing.T) {
	clock := testingclock.NewFakePassiveClock(time.Now())
	srv, c := newTestServer(t, WithClock(clock))
	ctx := testCtx(t)
	setDocs(t, c, map[string]map[string]any{"a/1": {}, "a/2": {}, "b/1": {}})
	before := clock.Now().Add(time.Second)
	clock.SetTime(clock.Now().Add(2 * time.Second))
	for _, p := range []string{"a/1", "a/2"} {
		if _, err := c.Doc(p).Delete(ctx); err != nil {
			t.Fatalf("Delete(%s): %v", p, err)
		}
	}
	setDocs(t, c, map[string]map[string]any{"a/2": {"v": 2}})
	stored := func() []string {
		srv.GServer.mu.Lock()
		defer srv.GServer.mu.Unlock()
		return slices.Sorted(maps.Keys(srv.GServer.dbs[testDB].docs))
	}
	if got, want := stored(), []string{"a/1", "a/2", "b/1"}; !slices.Equal(got, want) {
		t.Errorf("stored inside the window = %v, want %v", got, want)
	}
	docs, err := c.Collection("a").WithReadOptions(gfs.ReadTime(before)).Documents(ctx).GetAll()
	if err != nil || len(docs) != 2 {
		t.Errorf("query before the deletion = %d documents, %v; want 2", len(docs), err)
	}
	clock.SetTime(clock.Now().Add(versionRetention + time.Second))
	setDocs(t, c, map[string]map[string]any{"c/1": {}}) // a write expires what is due
	if got, want := stored(), []string{"a/2", "b/1", "c/1"}; !slices.Equal(got, want) {
		t.Errorf("stored after the window = %v, want %v", got, want)
	}
	checkIndex(t, srv)
	docs, err = c.Collection("a").Documents(ctx).GetAll()
	if err != nil || len(docs) != 1 || docs[0].Ref.ID != "2" {
		t.Errorf("query after the window = %d documents, %v; want a/2", len(docs), err)
	}
}
