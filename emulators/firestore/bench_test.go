package firestore

import (
	"context"
	"fmt"
	"testing"
	"time"

	gfs "cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Each benchmark drives the official client over loopback gRPC against an
// in-process emulator and reports operations per second.

func BenchmarkPointRead(b *testing.B) {
	_, c := newTestServer(b)
	ctx := context.Background()
	doc := c.Doc("bench/read")
	if _, err := doc.Set(ctx, map[string]any{"v": 1, "s": "payload"}); err != nil {
		b.Fatalf("Set: %v", err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := doc.Get(ctx); err != nil {
			b.Fatalf("Get: %v", err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
}

func BenchmarkCommit(b *testing.B) {
	_, c := newTestServer(b)
	ctx := context.Background()
	i := 0
	b.ResetTimer()
	for b.Loop() {
		i++
		if _, err := c.Doc(fmt.Sprintf("bench/w%d", i%1000)).Set(ctx, map[string]any{"v": i}); err != nil {
			b.Fatalf("Set: %v", err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

func BenchmarkTransaction(b *testing.B) {
	_, c := newTestServer(b)
	ctx := context.Background()
	doc := c.Doc("bench/counter")
	if _, err := doc.Set(ctx, map[string]any{"n": 0}); err != nil {
		b.Fatalf("Set: %v", err)
	}
	b.ResetTimer()
	for b.Loop() {
		err := c.RunTransaction(ctx, func(ctx context.Context, tx *gfs.Transaction) error {
			s, err := tx.Get(doc)
			if err != nil {
				return err
			}
			n, _ := s.DataAt("n")
			return tx.Set(doc, map[string]any{"n": n.(int64) + 1})
		})
		if err != nil {
			b.Fatalf("RunTransaction: %v", err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "txns/s")
}

// BenchmarkQuerySmallCollectionInBigDatabase runs the small queries of a
// reconcile against a fleet-sized database: 50 tenants holding 5,000
// clusters, each cluster with 10 node pools, and 5,000 outbox events
// (60,050 documents). A query's cost should follow the documents in its
// scope, not the database.
func BenchmarkQuerySmallCollectionInBigDatabase(b *testing.B) {
	srv, c := newTestServer(b)
	ctx := context.Background()
	const tenants, clusters, pools = 50, 100, 10
	created := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	seed := func(path string, fields map[string]*pb.Value) {
		if err := srv.SetDocument(&pb.Document{Name: testDB + "/documents/" + path, Fields: fields}); err != nil {
			b.Fatalf("SetDocument: %v", err)
		}
	}
	str := func(s string) *pb.Value { return &pb.Value{ValueType: &pb.Value_StringValue{StringValue: s}} }
	for t := range tenants {
		tenant := fmt.Sprintf("tenants/t%d", t)
		seed(tenant, map[string]*pb.Value{"name": str(tenant)})
		for k := range clusters {
			id := fmt.Sprintf("c%d-%d", t, k)
			cluster := tenant + "/clusters/" + id
			seed(cluster, map[string]*pb.Value{"id": str(id), "active": {ValueType: &pb.Value_BooleanValue{BooleanValue: true}}})
			seed(tenant+"/outbox/e"+id, map[string]*pb.Value{"time": {ValueType: &pb.Value_TimestampValue{TimestampValue: timestamppb.New(created)}}})
			for p := range pools {
				seed(fmt.Sprintf("%s/nodePools/np%d", cluster, p), map[string]*pb.Value{
					"active":    {ValueType: &pb.Value_BooleanValue{BooleanValue: true}},
					"createdAt": {ValueType: &pb.Value_TimestampValue{TimestampValue: timestamppb.New(created.Add(time.Duration(p) * time.Second))}},
				})
			}
		}
	}
	cluster := c.Doc("tenants/t7/clusters/c7-42")
	pools1 := cluster.Collection("nodePools").Where("active", "==", true).OrderBy("createdAt", gfs.Asc)
	check := func(docs []*gfs.DocumentSnapshot, err error, want int) {
		if err != nil {
			b.Fatalf("query: %v", err)
		}
		if len(docs) != want {
			b.Fatalf("query returned %d documents, want %d", len(docs), want)
		}
	}
	b.Run("collection", func(b *testing.B) {
		for b.Loop() {
			docs, err := pools1.Documents(ctx).GetAll()
			check(docs, err, pools)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
	})
	b.Run("collection-group", func(b *testing.B) {
		q := c.CollectionGroup("clusters").Where("id", "==", "c7-42").Limit(1)
		for b.Loop() {
			docs, err := q.Documents(ctx).GetAll()
			check(docs, err, 1)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
	})
	b.Run("transaction", func(b *testing.B) {
		// A read-write transaction's query runs again at commit, to check
		// for phantoms.
		i := 0
		for b.Loop() {
			i++
			err := c.RunTransaction(ctx, func(ctx context.Context, tx *gfs.Transaction) error {
				docs, err := tx.Documents(pools1).GetAll()
				check(docs, err, pools)
				return tx.Set(cluster, map[string]any{"id": "c7-42", "active": true, "run": i})
			})
			if err != nil {
				b.Fatalf("RunTransaction: %v", err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "txns/s")
	})
}
