package firestore

import (
	"context"
	"fmt"
	"testing"

	gfs "cloud.google.com/go/firestore"
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
