package store

import (
	"context"
	"errors"
	"strings"

	"cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// quickAttempts bounds the quick retries of an API call's transaction
// aborted by contention.
const quickAttempts = 8

// errAborted is the cause of a transaction attempt's context cancelled
// because Firestore aborted the attempt.
var errAborted = errors.New("transaction aborted by contention")

// callKey keys a call's *txCall in its attempts' contexts.
type callKey struct{}

// txCall is what the attempts of one API call's transaction share. Its
// attempts run one after the other, each RPC in the caller's goroutine.
type txCall struct {
	// cancel, when not nil, cancels the current attempt (errAborted);
	// nil for the library's own loop, left to run its retries.
	cancel context.CancelCauseFunc
	// last is the transaction of the call's last attempt: the next one
	// begins as its retry (retry_transaction), and so keeps its age.
	last []byte
}

// DialOption is for the connection of a Store's Firestore client
// (option.WithGRPCDialOption): it lets an API call retry a transaction
// that Firestore aborted at its commit after a pause of milliseconds
// instead of the client library's, as a retry of the attempt before, which
// keeps its place among the older transactions (transact). Without it the
// store works the same, with the library's pauses.
func DialOption() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(quickRetries)
}

// quickRetries begins each attempt of a call after its first as a retry of
// the one before, and cancels, with errAborted, the context of an attempt
// whose Commit Firestore aborted, so that the client library's
// RunTransaction returns at once instead of pausing before its own retry.
func quickRetries(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	call, _ := ctx.Value(callKey{}).(*txCall)
	if call == nil {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	if b, ok := req.(*pb.BeginTransactionRequest); ok {
		if call.last != nil && b.GetOptions() == nil {
			// The library names the attempt it retries itself; a
			// first attempt of its own names none.
			b = proto.CloneOf(b)
			b.Options = &pb.TransactionOptions{Mode: &pb.TransactionOptions_ReadWrite_{
				ReadWrite: &pb.TransactionOptions_ReadWrite{RetryTransaction: call.last},
			}}
			req = b
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		if r, ok := reply.(*pb.BeginTransactionResponse); ok && err == nil {
			call.last = r.GetTransaction()
		}
		return err
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	if status.Code(err) == codes.Aborted && strings.HasSuffix(method, "/Commit") && call.cancel != nil {
		call.cancel(errAborted)
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
// cancelled when the attempt is aborted, at a read or at the commit).
// Each attempt after the first begins as a retry of the one before, as
// the library's own retries do (DialOption): it keeps the age of the
// call's first attempt, so that no call begun since can abort it, and a
// call is aborted at most once by each call older than it. That is also
// why the next attempt follows at once: an attempt is aborted when an
// older transaction commits, which is then done, and a pause would only
// add to the call's time (fresh attempts, which a younger age made lose
// again and again, needed one to spread out). The last attempt is the
// library's own loop, begun the same way.
func (s *Store) transact(ctx context.Context, f func(context.Context, *firestore.Transaction) error) error {
	call := &txCall{}
	for range quickAttempts {
		actx, cancel := context.WithCancelCause(ctx)
		call.cancel = cancel
		err := s.fs.RunTransaction(context.WithValue(actx, callKey{}, call), func(ctx context.Context, tx *firestore.Transaction) error {
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
	}
	call.cancel = nil
	return s.fs.RunTransaction(context.WithValue(ctx, callKey{}, call), f)
}
