package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/logging"
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

// transact runs an API call's read-write transaction f, which writes in
// the tenant's tree, and learns its outcome when Firestore's answer to the
// commit is lost (resolve).
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
//
// Each attempt whose f returns nil writes, in the same commit, a receipt
// of its own under the tenant (receiptRef), so that a commit whose answer
// was lost is resolved: committed, transact returns nil and the caller
// answers with what that attempt's f made, as if nothing went wrong; not
// committed, the transaction runs again, up to lostCommitRuns times, and
// is then UNAVAILABLE; unknowable, UNAVAILABLE with the detail
// OUTCOME_UNKNOWN. f returns unchanged when it decides to write nothing:
// the transaction then ends without a commit, and without a receipt.
// With tenantID empty, no receipt is written, and a lost answer is
// OUTCOME_UNKNOWN.
func (s *Store) transact(ctx context.Context, tenantID string, f func(context.Context, *firestore.Transaction) error) error {
	for run := 1; ; run++ {
		var last *firestore.DocumentRef // the receipt of the last attempt that reached its commit
		err := s.attempts(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			last = nil
			if err := f(ctx, tx); err != nil {
				return err
			}
			if tenantID == "" {
				last = noReceipt
				return nil
			}
			ref := s.receiptRef(tenantID)
			if err := tx.Create(ref, receipt{ExpireAt: s.timestamp().Add(receiptTTL)}); err != nil {
				return err
			}
			last = ref
			return nil
		})
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unchanged):
			return nil
		case last == nil || !commitFailed(err):
			// f failed, or the attempt did not reach its commit.
			return err
		case last == noReceipt:
			return errs.OutcomeUnknown(err)
		}
		committed, rerr := s.resolve(ctx, last)
		switch {
		case rerr != nil:
			logging.FromContext(ctx).Warn("The outcome of a commit whose answer was lost cannot be learned", "error", err, "readBack", rerr)
			return errs.OutcomeUnknown(errors.Join(err, rerr))
		case committed:
			logging.FromContext(ctx).Info("A commit whose answer was lost was stored", "error", err)
			return nil
		case run == lostCommitRuns:
			return errs.Wrap(errs.Unavailable, err, "storage is unavailable; retry")
		}
		logging.FromContext(ctx).Warn("A commit whose answer was lost was not stored; running the transaction again", "error", err)
	}
}

// attempts runs f as one transaction, with the quick retries of attempts
// aborted by contention (transact).
func (s *Store) attempts(ctx context.Context, f func(context.Context, *firestore.Transaction) error) error {
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

// unchanged is what a transaction's f returns when it decided to write
// nothing (a replay, a pool deleting already): transact ends the
// transaction without a commit and returns nil.
var unchanged = errors.New("store: nothing to write")

// lostCommitRuns bounds the runs of one call's transaction whose commits
// were lost without being stored.
const lostCommitRuns = 3

// receiptTTL is how long a receipt is kept: far longer than a
// transaction can live (a commit in flight cannot land after it), and
// short, since only the call that wrote it reads it.
const receiptTTL = time.Hour

// resolveTimeout bounds the reading back of a lost commit's receipt
// beyond the call's own deadline: it goes on when the deadline ended the
// commit, so that the answer says what happened, and it is short, since
// a read and a write take milliseconds when Firestore answers at all.
const resolveTimeout = time.Second

// resolveTries bounds the reads and fences of one resolve.
const resolveTries = 3

// receipt is the identity of one transaction attempt, written in its
// commit at tenants/{t}/receipts/{random}: its existence says that the
// attempt committed. A fence is the receipt written by resolve in its
// place, so that the attempt can no longer commit.
type receipt struct {
	ExpireAt time.Time `firestore:"expireAt"`
	Fence    bool      `firestore:"fence,omitempty"`
}

// noReceipt marks an attempt that reached its commit with no receipt
// (transact without a tenant).
var noReceipt = &firestore.DocumentRef{}

func (s *Store) receiptRef(tenantID string) *firestore.DocumentRef {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return s.tenant(tenantID).Collection("receipts").Doc(hex.EncodeToString(b))
}

// commitFailed reports whether err, the error of a transaction whose f
// returned nil, is its commit's and leaves its outcome unknown: the end of
// the call's context, or a status that a commit may get after Firestore
// stored it (its answer lost: UNAVAILABLE, DEADLINE_EXCEEDED; INTERNAL
// and UNKNOWN; and INVALID_ARGUMENT, which the client library's retry of
// a commit whose answer was lost gets: the transaction has ended). A
// refusal (ABORTED, PERMISSION_DENIED, ...) stored nothing.
func commitFailed(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Internal, codes.Unknown, codes.InvalidArgument:
		return true
	}
	return false
}

// resolve learns whether the attempt whose receipt is ref committed. The
// receipt read back says so; none read does not yet say the attempt did
// not, since a commit past its caller's deadline may still be in flight.
// So resolve then creates the receipt itself, as a fence: once it is
// stored, the attempt's own create of it cannot commit any more. A fence
// that meets the receipt (ALREADY_EXISTS) reads it again: the attempt's
// receipt, or an earlier fence of resolve's whose answer was lost. err is
// the last failure when no read or fence succeeded.
func (s *Store) resolve(ctx context.Context, ref *firestore.DocumentRef) (committed bool, err error) {
	budget := resolveTimeout
	if d, ok := ctx.Deadline(); ok {
		budget = max(budget, time.Until(d))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	defer cancel()
	for range resolveTries {
		var snap *firestore.DocumentSnapshot
		snap, err = ref.Get(ctx)
		switch {
		case err == nil:
			var r receipt
			if err = snap.DataTo(&r); err == nil {
				return !r.Fence, nil
			}
			continue
		case !isNotFound(err):
			continue
		}
		_, err = ref.Create(ctx, receipt{ExpireAt: s.timestamp().Add(receiptTTL), Fence: true})
		if err == nil {
			return false, nil
		}
		// ALREADY_EXISTS, or a lost answer: read it again.
	}
	return false, err
}
