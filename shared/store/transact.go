package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Quick retries of an API call's transaction aborted by contention.
const (
	quickAttempts  = 8
	quickFirstWait = 2 * time.Millisecond
	quickMaxWait   = 100 * time.Millisecond
)

// errAborted is the cause of a transaction attempt's context cancelled
// because Firestore aborted the attempt.
var errAborted = errors.New("transaction aborted by contention")

// abortKey keys an attempt's *abortHook in its context.
type abortKey struct{}

type abortHook struct{ cancel context.CancelCauseFunc }

// DialOption is for the connection of a Store's Firestore client
// (option.WithGRPCDialOption): it lets an API call retry a transaction
// that Firestore aborted at its commit after a pause of milliseconds
// instead of the client library's (transact). Without it the store works
// the same, with the library's pauses.
func DialOption() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(noticeAbortedCommit)
}

// noticeAbortedCommit cancels, with errAborted, the context of a
// transaction attempt whose Commit Firestore aborted, so that the client
// library's RunTransaction returns at once instead of pausing before its
// own retry.
func noticeAbortedCommit(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if status.Code(err) == codes.Aborted && strings.HasSuffix(method, "/Commit") {
		if h, ok := ctx.Value(abortKey{}).(*abortHook); ok {
			h.cancel(errAborted)
		}
	}
	return err
}

// transact runs an API call's read-write transaction f.
//
// Firestore's locks abort the younger of two transactions when the older
// writes a document the younger read (wound-wait). Every node pool call
// reads and writes its cluster's document, and so do the reconcile runs
// the calls kick, so calls on one busy cluster often meet. The transaction
// that wins holds its locks for milliseconds, but the client library
// pauses a random time of up to a second before its first retry, and up
// to 1.3 s, 1.7 s, ... before the next: under contention, that pause was
// the whole tail of the calls' latency. So the first attempts run here,
// each with the library's retries cut short (its attempt's context is
// cancelled when the attempt is aborted, at a read or at the commit) and
// pauses that start at 2 ms and double to 100 ms, with full jitter. A
// fresh attempt is a younger transaction, which an older one may abort
// again; the last attempt is the library's own loop, whose retries keep
// their age, so a call that keeps losing still wins in the end.
func (s *Store) transact(ctx context.Context, f func(context.Context, *firestore.Transaction) error) error {
	wait := quickFirstWait
	for range quickAttempts {
		actx, cancel := context.WithCancelCause(ctx)
		err := s.fs.RunTransaction(context.WithValue(actx, abortKey{}, &abortHook{cancel}), func(ctx context.Context, tx *firestore.Transaction) error {
			err := f(ctx, tx)
			if status.Code(err) == codes.Aborted {
				cancel(errAborted)
			}
			return err
		})
		aborted := context.Cause(actx) == errAborted
		cancel(nil)
		if !aborted || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(time.Duration(1 + rand.Int64N(int64(wait))))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, quickMaxWait)
	}
	return s.fs.RunTransaction(ctx, f)
}
