package firestore

import (
	"context"
	"testing"

	gfs "cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestEnvVarConnection(t *testing.T) {
	srv, err := NewServer()
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	t.Setenv("FIRESTORE_EMULATOR_HOST", srv.Addr)
	ctx := testCtx(t)
	c, err := gfs.NewClient(ctx, "env-project")
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Doc("a/b").Set(ctx, map[string]any{"x": 1}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if got := srv.Document("projects/env-project/databases/(default)/documents/a/b"); got == nil {
		t.Fatalf("Document(a/b) = nil, want the document written through the env var connection")
	}
}

func TestCoreReadWrite(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	doc := c.Doc("users/alice")
	if _, err := doc.Create(ctx, map[string]any{"name": "Alice", "age": 30}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	_, err := doc.Create(ctx, map[string]any{"name": "again"})
	if status.Code(err) != codes.AlreadyExists {
		t.Fatalf("second Create = %v, want AlreadyExists", err)
	}
	snap, err := doc.Get(ctx)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got := snap.Data()["name"]; got != "Alice" {
		t.Errorf("Get name = %v, want Alice", got)
	}
	_, err = c.Doc("users/nobody").Get(ctx)
	if status.Code(err) != codes.NotFound {
		t.Errorf("Get(missing) = %v, want NotFound", err)
	}
	err = c.RunTransaction(ctx, func(ctx2 context.Context, tx *gfs.Transaction) error {
		s, err := tx.Get(doc)
		if err != nil {
			return err
		}
		age, _ := s.DataAt("age")
		return tx.Update(doc, []gfs.Update{{Path: "age", Value: age.(int64) + 1}})
	})
	if err != nil {
		t.Fatalf("RunTransaction: %v", err)
	}
	snap, _ = doc.Get(ctx)
	if got := snap.Data()["age"]; got != int64(31) {
		t.Errorf("age after transaction = %v, want 31", got)
	}
	docs, err := c.Collection("users").Where("age", ">", 18).Documents(ctx).GetAll()
	if err != nil || len(docs) != 1 {
		t.Fatalf("query = %d docs, %v; want 1", len(docs), err)
	}
	if _, err := doc.Delete(ctx); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err = doc.Update(ctx, []gfs.Update{{Path: "age", Value: 1}})
	if status.Code(err) != codes.NotFound {
		t.Errorf("Update(deleted) = %v, want NotFound", err)
	}
}
