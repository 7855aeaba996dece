package firestore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	gfs "cloud.google.com/go/firestore"
	apiv1 "cloud.google.com/go/firestore/apiv1"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// newRawClient connects the generated Firestore client, for the parts of the
// protocol the high-level client does not expose.
func newRawClient(t *testing.T, srv *Server) *apiv1.Client {
	t.Helper()
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	c, err := apiv1.NewClient(context.Background(), option.WithGRPCConn(conn))
	if err != nil {
		t.Fatalf("apiv1.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func batchGet(ctx context.Context, c *apiv1.Client, req *pb.BatchGetDocumentsRequest) ([]*pb.BatchGetDocumentsResponse, error) {
	stream, err := c.BatchGetDocuments(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []*pb.BatchGetDocumentsResponse
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

func TestBatchGetMaskMissingAndNewTransaction(t *testing.T) {
	srv, c := newTestServer(t)
	raw := newRawClient(t, srv)
	ctx := testCtx(t)
	if _, err := c.Doc("b/one").Set(ctx, map[string]any{"keep": 1, "drop": 2}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	resps, err := batchGet(ctx, raw, &pb.BatchGetDocumentsRequest{
		Database:            testDB,
		Documents:           []string{testDB + "/documents/b/one", testDB + "/documents/b/two"},
		Mask:                &pb.DocumentMask{FieldPaths: []string{"keep"}},
		ConsistencySelector: &pb.BatchGetDocumentsRequest_NewTransaction{NewTransaction: &pb.TransactionOptions{}},
	})
	if err != nil || len(resps) != 2 {
		t.Fatalf("BatchGetDocuments = %d responses, %v; want 2", len(resps), err)
	}
	if f := resps[0].GetFound().GetFields(); len(f) != 1 || f["keep"] == nil {
		t.Errorf("masked document fields = %v, want only keep", f)
	}
	if m := resps[1].GetMissing(); m != testDB+"/documents/b/two" {
		t.Errorf("missing = %q, want b/two", m)
	}
	tx := resps[0].GetTransaction()
	if len(tx) == 0 {
		t.Fatalf("first response has no transaction, want the new one")
	}
	if _, err := raw.Commit(ctx, &pb.CommitRequest{Database: testDB, Transaction: tx}); err != nil {
		t.Errorf("Commit(new transaction) = %v, want success", err)
	}
	_, err = raw.Commit(ctx, &pb.CommitRequest{Database: testDB, Transaction: tx})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("second Commit of the same transaction = %v, want InvalidArgument", err)
	}
}

func TestInvalidRequests(t *testing.T) {
	srv, _ := newTestServer(t)
	raw := newRawClient(t, srv)
	ctx := testCtx(t)
	doc := func(p string) string { return testDB + "/documents/" + p }
	update := func(name string, fields map[string]*pb.Value) *pb.Write {
		return &pb.Write{Operation: &pb.Write_Update{Update: &pb.Document{Name: name, Fields: fields}}}
	}
	for _, tc := range []struct {
		desc string
		call func() error
		want codes.Code
	}{
		{"malformed document name", func() error {
			_, err := raw.Commit(ctx, &pb.CommitRequest{Database: testDB, Writes: []*pb.Write{{Operation: &pb.Write_Delete{Delete: "projects/p/documents/a/b"}}}})
			return err
		}, codes.InvalidArgument},
		{"collection instead of document", func() error {
			_, err := raw.Commit(ctx, &pb.CommitRequest{Database: testDB, Writes: []*pb.Write{{Operation: &pb.Write_Delete{Delete: doc("a")}}}})
			return err
		}, codes.InvalidArgument},
		{"document of another database", func() error {
			_, err := raw.Commit(ctx, &pb.CommitRequest{Database: testDB, Writes: []*pb.Write{update("projects/other/databases/(default)/documents/a/b", nil)}})
			return err
		}, codes.InvalidArgument},
		{"value without type", func() error {
			_, err := raw.Commit(ctx, &pb.CommitRequest{Database: testDB, Writes: []*pb.Write{update(doc("a/b"), map[string]*pb.Value{"x": {}})}})
			return err
		}, codes.InvalidArgument},
		{"array in array", func() error {
			inner := &pb.Value{ValueType: &pb.Value_ArrayValue{ArrayValue: &pb.ArrayValue{}}}
			outer := &pb.Value{ValueType: &pb.Value_ArrayValue{ArrayValue: &pb.ArrayValue{Values: []*pb.Value{inner}}}}
			_, err := raw.Commit(ctx, &pb.CommitRequest{Database: testDB, Writes: []*pb.Write{update(doc("a/b"), map[string]*pb.Value{"x": outer})}})
			return err
		}, codes.InvalidArgument},
		{"bad update mask path", func() error {
			w := update(doc("a/b"), nil)
			w.UpdateMask = &pb.DocumentMask{FieldPaths: []string{"a..b"}}
			_, err := raw.Commit(ctx, &pb.CommitRequest{Database: testDB, Writes: []*pb.Write{w}})
			return err
		}, codes.InvalidArgument},
		{"conflicting update mask paths", func() error {
			w := update(doc("a/b"), nil)
			w.UpdateMask = &pb.DocumentMask{FieldPaths: []string{"a", "a.b"}}
			_, err := raw.Commit(ctx, &pb.CommitRequest{Database: testDB, Writes: []*pb.Write{w}})
			return err
		}, codes.InvalidArgument},
		{"unknown transaction", func() error {
			_, err := raw.Commit(ctx, &pb.CommitRequest{Database: testDB, Transaction: []byte("nope")})
			return err
		}, codes.InvalidArgument},
		{"rollback unknown transaction", func() error {
			return raw.Rollback(ctx, &pb.RollbackRequest{Database: testDB, Transaction: []byte("nope")})
		}, codes.InvalidArgument},
		{"range filter on null", func() error {
			stream, err := raw.RunQuery(ctx, &pb.RunQueryRequest{Parent: testDB + "/documents", QueryType: &pb.RunQueryRequest_StructuredQuery{StructuredQuery: &pb.StructuredQuery{
				From: []*pb.StructuredQuery_CollectionSelector{{CollectionId: "a"}},
				Where: &pb.StructuredQuery_Filter{FilterType: &pb.StructuredQuery_Filter_FieldFilter{FieldFilter: &pb.StructuredQuery_FieldFilter{
					Field: &pb.StructuredQuery_FieldReference{FieldPath: "x"}, Op: pb.StructuredQuery_FieldFilter_LESS_THAN,
					Value: &pb.Value{ValueType: &pb.Value_NullValue{}},
				}}},
			}}})
			if err != nil {
				return err
			}
			_, err = stream.Recv()
			return err
		}, codes.InvalidArgument},
		{"cursor longer than the order", func() error {
			stream, err := raw.RunQuery(ctx, &pb.RunQueryRequest{Parent: testDB + "/documents", QueryType: &pb.RunQueryRequest_StructuredQuery{StructuredQuery: &pb.StructuredQuery{
				From:    []*pb.StructuredQuery_CollectionSelector{{CollectionId: "a"}},
				StartAt: &pb.Cursor{Values: []*pb.Value{{ValueType: &pb.Value_IntegerValue{}}, {ValueType: &pb.Value_IntegerValue{}}}},
			}}})
			if err != nil {
				return err
			}
			_, err = stream.Recv()
			return err
		}, codes.InvalidArgument},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if err := tc.call(); status.Code(err) != tc.want {
				t.Errorf("call = %v, want code %v", err, tc.want)
			}
		})
	}
}

func TestReadOnlyTransactionSnapshot(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	doc := c.Doc("s/doc")
	wr, err := doc.Set(ctx, map[string]any{"v": 1})
	if err != nil {
		t.Fatalf("Set: %v", err)
	}
	var seen []int64
	attempt := 0
	err = c.RunTransaction(ctx, func(ctx context.Context, tx *gfs.Transaction) error {
		attempt++
		for i := range 2 {
			s, err := tx.Get(doc)
			if err != nil {
				return err
			}
			v, _ := s.DataAt("v")
			seen = append(seen, v.(int64))
			if i == 0 {
				if _, err := doc.Set(ctx, map[string]any{"v": 2}); err != nil {
					return err
				}
			}
		}
		return nil
	}, gfs.ReadOnly)
	if err != nil {
		t.Fatalf("RunTransaction: %v", err)
	}
	if len(seen) != 2 || seen[0] != 1 || seen[1] != 1 {
		t.Errorf("reads in a read-only transaction = %v, want [1 1]", seen)
	}
	old, err := c.GetAll(ctx, []*gfs.DocumentRef{doc})
	if err != nil || old[0].Data()["v"] != int64(2) {
		t.Fatalf("GetAll = %v, %v; want v=2", old, err)
	}
	snaps, err := c.WithReadOptions(gfs.ReadTime(wr.UpdateTime)).GetAll(ctx, []*gfs.DocumentRef{doc})
	if err != nil {
		t.Fatalf("GetAll at read time: %v", err)
	}
	if got := snaps[0].Data()["v"]; got != int64(1) {
		t.Errorf("GetAll at the first write's time = %v, want 1", got)
	}
}

func TestProjectsAreIsolated(t *testing.T) {
	srv, c1 := newTestServer(t)
	c2 := newClient(t, srv, "other-project")
	ctx := testCtx(t)
	if _, err := c1.Doc("iso/doc").Set(ctx, map[string]any{"v": 1}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if _, err := c2.Doc("iso/doc").Get(ctx); status.Code(err) != codes.NotFound {
		t.Errorf("Get from another project = %v, want NotFound", err)
	}
}

func TestResetExportImport(t *testing.T) {
	srv, c := newTestServer(t)
	ctx := testCtx(t)
	when := time.Date(2020, 5, 6, 7, 8, 9, 123456000, time.UTC)
	if _, err := c.Doc("e/doc").Set(ctx, map[string]any{"t": when, "b": []byte("x"), "n": 1.5}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	var buf bytes.Buffer
	if err := srv.Export(&buf); err != nil {
		t.Fatalf("Export: %v", err)
	}
	before := srv.Document(testDB + "/documents/e/doc")
	srv.Reset()
	if d := srv.Document(testDB + "/documents/e/doc"); d != nil {
		t.Fatalf("Document after Reset = %v, want nil", d)
	}
	if err := srv.Import(&buf); err != nil {
		t.Fatalf("Import: %v", err)
	}
	after := srv.Document(testDB + "/documents/e/doc")
	if after == nil || !after.UpdateTime.AsTime().Equal(before.UpdateTime.AsTime()) || !fieldsEqual(after.Fields, before.Fields) {
		t.Errorf("Document after Import = %v, want %v", after, before)
	}
	if err := srv.Import(bytes.NewBufferString(`{"documents":[{"name":"bad"}]}`)); err == nil {
		t.Errorf("Import(bad name) = nil, want an error")
	}
}

// Faults through the official client: a reactor given to WithReactor that
// decides by the request, FailNext on a unary and on a streaming RPC, a
// latency, the calls counted, and Reset removing them.
func TestFaults(t *testing.T) {
	srv, c := newTestServer(t, WithReactor("Commit", refuseCollection{"locked"}))
	ctx := testCtx(t)
	create := func(path string) error {
		_, err := c.Doc(path).Create(ctx, map[string]any{"v": 1})
		return err
	}
	if err := create("locked/doc"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Create(locked/doc) = %v, want the reactor's PermissionDenied", err)
	}
	if err := create("r/a"); err != nil {
		t.Errorf("Create(r/a) = %v, want it through the reactor", err)
	}
	const denied = "Missing or insufficient permissions."
	srv.FailNext("Commit", 1, codes.PermissionDenied, denied)
	if err := create("r/b"); status.Code(err) != codes.PermissionDenied || status.Convert(err).Message() != denied {
		t.Errorf("first Create(r/b) = %v, want PermissionDenied %q", err, denied)
	}
	if err := create("r/b"); err != nil {
		t.Errorf("second Create(r/b) = %v, want success", err)
	}
	if n := srv.Calls("Commit"); n != 4 {
		t.Errorf("Calls(Commit) = %d, want 4", n)
	}

	srv.FailNext("RunQuery", 1, codes.Internal, "boom")
	if _, err := c.Collection("r").Documents(ctx).GetAll(); status.Code(err) != codes.Internal {
		t.Errorf("query = %v, want Internal", err)
	}
	if docs, err := c.Collection("r").Documents(ctx).GetAll(); err != nil || len(docs) != 2 {
		t.Errorf("query after the fault = %d documents, %v; want 2", len(docs), err)
	}

	const latency = 100 * time.Millisecond
	srv.SetLatency("BatchGetDocuments", latency)
	begin := time.Now()
	if _, err := c.Doc("r/a").Get(ctx); err != nil {
		t.Errorf("delayed Get = %v", err)
	}
	if took := time.Since(begin); took < latency {
		t.Errorf("delayed Get took %v, want at least %v", took, latency)
	}

	srv.Reset()
	if err := create("locked/doc"); err != nil {
		t.Errorf("Create(locked/doc) after Reset = %v, want the reactor gone", err)
	}
}

// refuseCollection refuses the commits that write into one collection.
type refuseCollection struct{ id string }

func (r refuseCollection) React(req any) (bool, any, error) {
	for _, w := range req.(*pb.CommitRequest).GetWrites() {
		if strings.Contains(w.GetUpdate().GetName(), "/documents/"+r.id+"/") {
			return true, nil, status.Error(codes.PermissionDenied, "Missing or insufficient permissions.")
		}
	}
	return false, nil, nil
}

func TestListen(t *testing.T) {
	_, c := newTestServer(t)
	ctx := testCtx(t)
	if _, err := c.Doc("l/a").Set(ctx, map[string]any{"v": 1}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	it := c.Collection("l").Where("v", ">", 0).Snapshots(ctx)
	t.Cleanup(it.Stop)
	snap, err := it.Next()
	if err != nil || snap.Size != 1 {
		t.Fatalf("first snapshot = %v, %v; want 1 document", snap, err)
	}
	if _, err := c.Doc("l/b").Set(ctx, map[string]any{"v": 2}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	snap, err = it.Next()
	if err != nil || snap.Size != 2 || len(snap.Changes) != 1 || snap.Changes[0].Kind != gfs.DocumentAdded {
		t.Fatalf("second snapshot = %+v, %v; want 2 documents with one added", snap, err)
	}
	if _, err := c.Doc("l/a").Delete(ctx); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	snap, err = it.Next()
	if err != nil || snap.Size != 1 || snap.Changes[0].Kind != gfs.DocumentRemoved {
		t.Fatalf("third snapshot = %+v, %v; want 1 document with one removed", snap, err)
	}
}
