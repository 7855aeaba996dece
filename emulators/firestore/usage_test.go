package firestore

import (
	"context"
	"testing"

	gfs "cloud.google.com/go/firestore"
)

// TestUsage checks the billed operations counted for each kind of call of
// the official client.
func TestUsage(t *testing.T) {
	srv, c := newTestServer(t)
	ctx := testCtx(t)
	col := c.Collection("things")
	step := func(what string, do func() error, want Usage) {
		t.Helper()
		before := srv.Usage()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		after := srv.Usage()
		got := Usage{after.Reads - before.Reads, after.Writes - before.Writes, after.Deletes - before.Deletes}
		if got != want {
			t.Errorf("%s: counted %+v, want %+v", what, got, want)
		}
	}
	step("a batch of two sets and an update", func() error {
		b := c.Batch()
		b.Set(col.Doc("a"), map[string]any{"n": 1})
		b.Set(col.Doc("b"), map[string]any{"n": 2})
		b.Update(col.Doc("a"), []gfs.Update{{Path: "n", Value: gfs.Increment(1)}})
		_, err := b.Commit(ctx)
		return err
	}, Usage{Writes: 3})
	step("a get", func() error { _, err := col.Doc("a").Get(ctx); return err }, Usage{Reads: 1})
	step("a get of a missing document", func() error {
		if _, err := col.Doc("missing").Get(ctx); err == nil {
			t.Errorf("get of a missing document succeeded")
		}
		return nil
	}, Usage{Reads: 1})
	step("GetAll of three, one missing", func() error {
		_, err := c.GetAll(ctx, []*gfs.DocumentRef{col.Doc("a"), col.Doc("b"), col.Doc("missing")})
		return err
	}, Usage{Reads: 3})
	step("a query of two", func() error { _, err := col.Documents(ctx).GetAll(); return err }, Usage{Reads: 2})
	step("a query of none", func() error { _, err := col.Where("n", ">", 10).Documents(ctx).GetAll(); return err }, Usage{Reads: 1})
	step("a query whose offset skips one of two", func() error { _, err := col.Offset(1).Documents(ctx).GetAll(); return err }, Usage{Reads: 2})
	step("a query of two explained without analyze", func() error {
		_, err := col.WithRunOptions(gfs.ExplainOptions{}).Documents(ctx).GetAll()
		return err
	}, Usage{Reads: 1})
	step("a count", func() error { _, err := col.NewAggregationQuery().WithCount("n").Get(ctx); return err }, Usage{Reads: 1})
	step("a transaction that reads one and deletes another", func() error {
		return c.RunTransaction(ctx, func(_ context.Context, tx *gfs.Transaction) error {
			if _, err := tx.Get(col.Doc("a")); err != nil {
				return err
			}
			return tx.Delete(col.Doc("b"))
		})
	}, Usage{Reads: 1, Deletes: 1})
}
