package store

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/lifecycle"
)

// TestTransactAbortedCommit has an older transaction write a document that
// transact's first attempt read, so that Firestore aborts the attempt at
// its commit. With DialOption the attempt is retried by transact itself
// (each attempt's context is its own), without it by the client library.
// Either way the call ends with the second attempt's write, and the second
// attempt begins as a retry of the first, keeping its age.
func TestTransactAbortedCommit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []grpc.DialOption
		quick bool
	}{
		{"DialOption", []grpc.DialOption{DialOption()}, true},
		{"library", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			begins := &beginRecorder{}
			fs := fsemu.ForTest(t, "transact", append(tc.opts, grpc.WithChainUnaryInterceptor(begins.record))...)
			s, err := New(fs, lifecycle.Rules{})
			if err != nil {
				t.Fatal(err)
			}
			doc := fs.Doc("counters/c")
			if _, err := doc.Set(ctx, map[string]any{"n": 0}); err != nil {
				t.Fatal(err)
			}

			olderRead, youngerRead := make(chan struct{}), make(chan struct{})
			olderDone := make(chan error, 1)
			go func() {
				olderDone <- fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
					if _, err := tx.Get(doc); err != nil {
						return err
					}
					close(olderRead)
					<-youngerRead
					return tx.Set(doc, map[string]any{"n": 1})
				}, firestore.MaxAttempts(1))
			}()
			<-olderRead

			var (
				mu       sync.Mutex
				attempts []context.Context // each attempt's
			)
			err = s.transact(ctx, "acme", func(ctx context.Context, tx *firestore.Transaction) error {
				snap, err := tx.Get(doc)
				if err != nil {
					return err
				}
				mu.Lock()
				attempts = append(attempts, ctx)
				first := len(attempts) == 1
				mu.Unlock()
				if first {
					// The older transaction commits now, aborting this one.
					close(youngerRead)
					if err := <-olderDone; err != nil {
						t.Errorf("older transaction: %v", err)
					}
				}
				n, _ := snap.DataAt("n")
				return tx.Set(doc, map[string]any{"n": n.(int64) + 10})
			})
			if err != nil {
				t.Fatalf("transact: %v", err)
			}
			snap, err := doc.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := snap.DataAt("n"); n != int64(11) {
				t.Errorf("n = %v, want 11 (the older write, then the retried one)", n)
			}
			if len(attempts) != 2 {
				t.Fatalf("attempts = %d, want 2", len(attempts))
			}
			if quick := context.Cause(attempts[0]) == errAborted; quick != tc.quick {
				t.Errorf("retried by transact itself = %v, want %v", quick, tc.quick)
			}
			// The older transaction's begin is the first; the call's
			// attempts follow.
			got := begins.get()
			if len(got) != 3 {
				t.Fatalf("BeginTransaction calls = %d, want 3", len(got))
			}
			if first, retry := got[1].id, got[2].retry; !bytes.Equal(retry, first) || first == nil {
				t.Errorf("second attempt retries transaction %x, want the first attempt's %x", retry, first)
			}
		})
	}
}

// beginRecorder records the BeginTransaction calls of a connection, as
// they reach the server: the transaction each retries and the one it got.
type beginRecorder struct {
	mu    sync.Mutex
	calls []begin
}

type begin struct{ retry, id []byte }

func (r *beginRecorder) record(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if b, ok := req.(*pb.BeginTransactionRequest); ok {
		r.mu.Lock()
		r.calls = append(r.calls, begin{retry: b.GetOptions().GetReadWrite().GetRetryTransaction(), id: reply.(*pb.BeginTransactionResponse).GetTransaction()})
		r.mu.Unlock()
	}
	return err
}

func (r *beginRecorder) get() []begin {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]begin(nil), r.calls...)
}
