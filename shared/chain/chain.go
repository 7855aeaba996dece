// Package chain is the machinery every reconciler shares: one chain of
// reconcile runs (Cloud Tasks) per subject (a cluster, a substrate), the
// chain token that makes a stale task end quietly, the lease that keeps two
// runs of one subject from overlapping, backoff, the successor's name,
// publishing a run's events, and the watchdog that restarts dead chains and
// drains the outbox.
//
// A reconciler plugs in what differs (Subject): which documents a run reads,
// what it decides without the lease (Run.Plan), what it does under the
// lease (Run.Act), and how it saves the outcome, a small value (Outcome:
// what comes next, when, and whether anything changed). The loop is the
// chain's: read, plan, take the lease, act, save, schedule. Every subject's
// document lives at tenants/{tenantId}/{collection}/{id} (each ID as the
// store encodes it) and carries two fields the chain owns: "active" (false
// once the subject is gone for good) and "reconcile" (State), beside its
// own "tenantId" and "id". Only this package decides State's lease
// fields; the API restarts the chain (Restart) in its own transactions.
// The chain reads and writes through the store (Storage), which owns the
// documents: a subject is named by its Key, its document reaches the kind
// as a Doc, and the kind's writes go through the store's functions in the
// store's transaction (Tx).
//
// An error is not a no. A run's save can commit and its answer be lost,
// and its successor's enqueue can fail, or make the task and lose its
// answer; its instance can die between the two. None of these leaves the
// chain without a run due within one interval, and none waits for the
// watchdog:
//   - The successor's task is named after the task that schedules it
//     (Scheduler), so an enqueue is tried again at once, and a task
//     retried by Cloud Tasks schedules the same successor: Cloud Tasks
//     keeps one.
//   - A chain that keeps its token (a converging or a steady chain) is
//     run again by its task's retry, which reads and observes afresh.
//   - A change's chain that hands its subject to a steady chain writes
//     the steady chain's token with its save, derived from its own token
//     and the task's name. A save that answers an error is read back: if
//     the token is stored, the save committed and the run goes on. The
//     task retried after any failure past that save finds the stored
//     token its own, not stale, and schedules the steady chain's first
//     run again under the same name; so does a duplicate delivery of the
//     task that finds the token changed under it to its own (Cloud Tasks
//     ends the task with the first success, whatever became of the
//     delivery that made the hand-over).
//
// Level-triggered, and an error is not a no, for provider calls too
// (ARCHITECTURE rule 8): the loop keeps a run's intent. A plan that calls
// the provider names the call (Plan.Intent); the loop records it in the
// chain (State.Intent) under the lease before it calls Act, keeps it when
// Act fails or asks for a retry (a lost answer may hide a call that was
// done), and clears it with the save of any other outcome. The next run
// is told of it (Intending), and the loop calls nothing while it is
// pending until a plan resolves it by looking at the provider
// (Plan.Resolved: done, or not done; a call still running is neither,
// and the plan waits). So a new kind cannot call twice after a lost
// answer even if it forgets. Clusters and substrates declare no loop
// intent: they keep their own intents in their documents, one for the
// cluster and one per pool, since one run acts on many pools at once,
// each with its own call in flight, resolved on its own into the
// operation it started; the loop's single intent per subject can express
// neither.
//
// The watchdog is the last resort, for a task lost for good: a chain
// whose tasks keep failing for as long as Cloud Tasks retries them. No
// one slow call holds its pass: restarts run several at once, each under
// a deadline, beside the outbox's drain, whose publishes have deadlines
// too.
package chain

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// Field is the name of the chain's field in a subject's document.
const Field = "reconcile"

// Kick asks for a run of one subject's chain, carrying the chain token the
// run must present.
type Kick struct {
	// Kind names the reconciler: the subject's collection ("clusters").
	Kind     string
	TenantID string
	ID       string
	Token    string
	// Link is the W3C traceparent of the span that asked for the
	// chain's work (a tenant's API call, a watchdog pass, a substrate's
	// run); empty for none. Each run's span links to it, and the chain's
	// tasks carry it on while the subject converges, so that a tenant's
	// call can be followed through the runs that converge it.
	Link string
	// Hint is what the run that scheduled this one expects it to read
	// first (Outcome.Hint), so that its subject can start the reads that
	// need its document before the document arrives (Prefetcher): a
	// steady cluster's provider coordinates. Opaque to the chain, and
	// never trusted: the subject uses what it fetched only when the
	// document agrees. Empty for a kick that no run scheduled.
	Hint string
}

// State is a subject's chain: the token of the one task chain allowed to
// run it, when it should run next (the watchdog's deadline), and the lease
// of the run in progress.
type State struct {
	Token       string    `firestore:"token"`
	NextAt      time.Time `firestore:"nextAt"`
	LeaseOwner  string    `firestore:"leaseOwner"`
	LeaseExpiry time.Time `firestore:"leaseExpiry"`
	Failures    int       `firestore:"failures"` // consecutive transient failures, for backoff
	// Intent is the provider call a run recorded before making it
	// (Plan.Intent) and no save has settled yet; nil for none.
	Intent *Intent `firestore:"intent,omitempty"`
}

// Restart issues a new chain token due now and returns the kick of the new
// chain: the old chain's next task finds its token stale and stops. The
// caller writes s with the change that needed the run. The new chain is a
// converging one (Kick.Steady is false) until a run finds its subject
// steady.
func (s *State) Restart(kind, tenantID, id string, now time.Time) Kick {
	s.Token = newToken()
	s.NextAt = now
	return Kick{Kind: kind, TenantID: tenantID, ID: id, Token: s.Token}
}

// Wake is Restart for a change that another subject's transaction made
// to what this subject's runs read (a cluster's run changing its state
// wakes its substrate): it restarts the chain, unless a run of the chain
// is due already and none has begun under the lease since (a kick not yet
// taken up), which will read the change. It returns the kick to send
// once the transaction commits; nil when none is needed. So a subject
// woken many times before it runs runs once, and its chain keeps exactly
// one successor: the old chain's tasks find their token stale.
//
// A run without the lease that began before the change does not count:
// the change moves what it read, so its save fails and it reads again.
func (s *State) Wake(kind, tenantID, id string, now time.Time) *Kick {
	if s.LeaseOwner == "" && !s.NextAt.After(now) {
		return nil
	}
	k := s.Restart(kind, tenantID, id, now)
	return &k
}

// steadyPrefix starts the token of a steady chain (other tokens are hex).
const steadyPrefix = "s"

// Steady says whether k's chain is a steady one: a chain of refreshes of
// a subject that a run found with nothing to converge, as opposed to one
// started for a change (Restart). The two go on different queues, so that
// a tenant's change never waits behind a fleet's refreshes; a chain moves
// from one to the other only with a new token, so that a task delivered
// twice cannot leave a live chain on each.
func (k Kick) Steady() bool { return strings.HasPrefix(k.Token, steadyPrefix) }

// handOverToken is the token of the steady chain that the run of task, a
// task of the chain of token, hands its subject to. It derives from both,
// so that the task, delivered again after its hand-over committed (a lost
// answer, a failed enqueue, an instance that died), knows the hand-over
// for its own and schedules the steady chain's run again, under the same
// task name (Cloud Tasks keeps one); any other task of the old chain
// finds it stale.
func handOverToken(token, task string) string {
	h := sha256.Sum256([]byte(token + "\x00" + task))
	return steadyPrefix + hex.EncodeToString(h[:12])
}

func newToken() string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b)
}

func newOwner() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
