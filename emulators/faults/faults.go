// Package faults injects faults into an emulator's gRPC methods, for
// tests, in the manner of pstest's reactors
// (cloud.google.com/go/pubsub/v2/pstest: Reactor, WithErrorInjection).
// Every emulator of this repository embeds an *Injector in its Server and
// runs the Injector's interceptors before its own, so that a test fails,
// slows and counts the calls of any emulator the same way:
//
//	srv.FailNext("CreateNodePool", 2, codes.Unavailable, "try again")
//	srv.SetLatency("GetCluster", time.Second)
//	srv.AddReactor("Commit", faults.Error(codes.PermissionDenied, "denied"))
//	n := srv.Calls("CreateNodePool")
//
// A method is named as in its service ("CreateNodePool", "Commit"). Each
// call of a method, in this order:
//
//  1. is counted (Calls), whatever happens to it next;
//  2. waits the method's latency (SetLatency), in real time; a caller
//     that gives up meanwhile gets its context's error, and the call goes
//     no further;
//  3. is offered to the method's reactors in the order they were added
//     (AddReactor, FailNext); the first that handles it answers it, and
//     the emulator never sees it: nothing is authenticated, charged to a
//     quota or changed;
//  4. otherwise goes on to the emulator;
//  5. if the emulator served it successfully, may lose its answer
//     (LoseNext, LoseShare): the emulator's work is done, and the caller
//     gets an error, as when a deadline passes after the service
//     accepted a call, so that its retry meets what it did (ALREADY_EXISTS).
//
// Inject adds a Fault of its own, named by an ID, which Faults lists
// with the calls it has hit and Remove removes: a Fail (handled as a
// reactor, after those of AddReactor and FailNext), a Lose (after those of
// LoseNext and LoseShare, and also at the end of a streaming call) or a
// Delay (added to SetLatency's), for the next Count calls or until
// removed, each call hit with a chance Share drawn from a Seed when one
// is given, so that a test can replay the same hits. Its Method may be
// AnyMethod ("*"), every method's calls, after the method's own faults.
// SetMethods declares the methods a service has, and Inject then refuses
// any other name, as the devstack's POST /dev/faults does:
//
//	srv.SetMethods(faults.MethodsOf(grpcServer))
//	id, err := srv.Inject(faults.Fault{Method: "Commit", Action: faults.Lose,
//		Code: codes.Unavailable, Share: 0.1, Seed: &seed})
//
// A reactor of FailNext handles its next n calls and is then removed, so
// FailNext calls add up: FailNext(m, 2, ...) twice fails the next four
// calls of m. A reactor of AddReactor stays until RemoveFaults. A method
// has one latency: SetLatency replaces it, and 0 removes it.
//
// One mutex guards all of an Injector, and reactors run with it held: a
// Reactor must not block or call its Injector. A streaming call is
// counted, delayed and offered to the reactors at its first request
// message. The official clients retry some codes (UNAVAILABLE, and
// DEADLINE_EXCEEDED on reads, depending on the method): every attempt is
// a call of its own, counted and offered to the reactors.
package faults

import (
	"context"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Reactor decides the fate of a call before the emulator handles it. Its
// shape is pstest's, so one type can react in either. If handled is
// false, the call goes on to the next reactor and then to the emulator;
// otherwise it ends with err, or with resp when err is nil (a unary
// method only: a handled streaming call must end with an error).
type Reactor interface {
	React(req any) (handled bool, resp any, err error)
}

// Error returns a Reactor that fails every call with a status of code and
// msg, as pstest's WithErrorInjection does. Give the code and the message
// the real service would.
func Error(code codes.Code, msg string) Reactor { return errorReactor{status.Error(code, msg)} }

type errorReactor struct{ err error }

func (r errorReactor) React(any) (bool, any, error) { return true, nil, r.err }

// Outage is a reactor that fails every call with its error while it is
// on: an outage a test begins and ends (Set), for as many methods as it
// is added to.
type Outage struct {
	on  atomic.Bool
	err error
}

// NewOutage returns an Outage, off, that fails calls with code and msg.
func NewOutage(code codes.Code, msg string) *Outage {
	return &Outage{err: status.Error(code, msg)}
}

// Set begins (true) or ends (false) the outage.
func (o *Outage) Set(on bool) { o.on.Store(on) }

// React fails the call while the outage is on.
func (o *Outage) React(any) (bool, any, error) {
	if o.on.Load() {
		return true, nil, o.err
	}
	return false, nil, nil
}

var (
	_ grpc.UnaryServerInterceptor  = (*Injector)(nil).UnaryInterceptor
	_ grpc.StreamServerInterceptor = (*Injector)(nil).StreamInterceptor
)

// Injector holds the faults injected into one emulator's methods and
// counts their calls. The zero value injects nothing. It is safe for
// concurrent use.
type Injector struct {
	mu      sync.Mutex
	methods map[string]*method
	known   []string // SetMethods, sorted; nil: any name
	lastID  int      // Inject's last ID
}

// method is what is injected into one method, and its count of calls.
type method struct {
	calls    int
	latency  time.Duration
	reactors []*entry
	losses   []*loss
	lost     int
	injected []*injected // Inject's, in order
}

// entry is a reactor in a method's list.
type entry struct {
	r Reactor
	// left is how many more calls the reactor may handle before it is
	// removed; negative for no limit.
	left int
}

// AddReactor adds r to the reactors of every later call of method, after
// those added before it.
func (in *Injector) AddReactor(method string, r Reactor) {
	in.add(method, &entry{r: r, left: -1})
}

// FailNext makes the next n calls of method that no earlier reactor
// handles fail with a status of code and msg (see the package comment for
// how it adds up with other faults).
func (in *Injector) FailNext(method string, n int, code codes.Code, msg string) {
	if n > 0 {
		in.add(method, &entry{r: Error(code, msg), left: n})
	}
}

// SetLatency delays every later call of method by d (0 removes the
// delay), replacing an earlier latency of method.
func (in *Injector) SetLatency(method string, d time.Duration) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.method(method).latency = d
}

// Calls is how many times method was called, including the calls that
// failed, whether by a fault or by the emulator.
func (in *Injector) Calls(method string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.method(method).calls
}

// RemoveFaults removes every reactor, latency, loss of answers
// (LoseNext, LoseShare) and fault of Inject of every method. The counts
// of calls and of lost answers stay.
func (in *Injector) RemoveFaults() {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, m := range in.methods {
		m.latency, m.reactors, m.losses, m.injected = 0, nil, nil, nil
	}
}

func (in *Injector) add(name string, e *entry) {
	in.mu.Lock()
	defer in.mu.Unlock()
	m := in.method(name)
	m.reactors = append(m.reactors, e)
}

// method returns the record of the method named name. Must be called with
// the lock held.
func (in *Injector) method(name string) *method {
	m := in.methods[name]
	if m == nil {
		if in.methods == nil {
			in.methods = map[string]*method{}
		}
		m = &method{}
		in.methods[name] = m
	}
	return m
}

// before counts a call of the method named name with request req, waits
// its latency and offers it to its reactors. handled says that the call
// is answered with resp or err.
func (in *Injector) before(ctx context.Context, name string, req any) (handled bool, resp any, err error) {
	in.mu.Lock()
	m := in.method(name)
	m.calls++
	latency := m.latency + delay(m, in.method(AnyMethod))
	if latency == 0 {
		defer in.mu.Unlock()
		return in.offer(m, req)
	}
	in.mu.Unlock()
	t := time.NewTimer(latency)
	select {
	case <-ctx.Done():
		t.Stop()
		return true, nil, status.FromContextError(ctx.Err()).Err()
	case <-t.C:
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.offer(m, req)
}

// offer gives req to the method's reactors, then to the faults of Inject
// that fail it, the method's and then AnyMethod's. Must be called with
// the lock held.
func (in *Injector) offer(m *method, req any) (bool, any, error) {
	if handled, resp, err := m.offer(req); handled {
		return handled, resp, err
	}
	if f := pick(Fail, m, in.method(AnyMethod)); f != nil {
		return true, nil, f.err()
	}
	return false, nil, nil
}

// offer gives req to the method's reactors in order, and removes a
// limited reactor once it has handled its last call. Must be called with
// the lock held.
func (m *method) offer(req any) (bool, any, error) {
	for i, e := range m.reactors {
		handled, resp, err := e.r.React(req)
		if !handled {
			continue
		}
		if e.left > 0 {
			e.left--
			if e.left == 0 {
				m.reactors = append(m.reactors[:i:i], m.reactors[i+1:]...)
			}
		}
		return true, resp, err
	}
	return false, nil, nil
}

// UnaryInterceptor is a grpc.UnaryServerInterceptor that applies the
// faults before handler. Install it first, so that it sees every call:
//
//	grpc.NewServer(grpc.ChainUnaryInterceptor(in.UnaryInterceptor, own))
func (in *Injector) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return in.Call(ctx, path.Base(info.FullMethod), req, handler)
}

// Call applies the faults of the method named name to a call of it that
// does not arrive over gRPC (an emulator served over REST), as
// UnaryInterceptor does: handler is the emulator's serving of req, and
// an error of a fault is a gRPC status, which the caller answers in its
// protocol's form.
func (in *Injector) Call(ctx context.Context, name string, req any, handler func(ctx context.Context, req any) (any, error)) (any, error) {
	handled, resp, err := in.before(ctx, name, req)
	switch {
	case !handled:
		resp, err := handler(ctx, req)
		if err == nil {
			if lost := in.lose(name); lost != nil {
				return nil, lost
			}
		}
		return resp, err
	case err == nil && resp == nil:
		return nil, status.Errorf(codes.Internal, "faults: a reactor handled %s with neither a response nor an error", name)
	case err != nil:
		return nil, err
	}
	return resp, nil
}

// StreamInterceptor is a grpc.StreamServerInterceptor that applies the
// faults at a stream's first request message.
func (in *Injector) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	s := &stream{ServerStream: ss, in: in, name: path.Base(info.FullMethod)}
	err := handler(srv, s)
	if err == nil && s.seen && !s.handled {
		// Only the faults of Inject lose a stream's end (LoseNext and
		// LoseShare are of unary methods).
		if lost := in.loseInjected(s.name); lost != nil {
			return lost
		}
	}
	return err
}

// stream applies the faults when its first request message arrives.
type stream struct {
	grpc.ServerStream
	in      *Injector
	name    string
	seen    bool
	handled bool // by a fault, at the first message
}

func (s *stream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil || s.seen {
		return err
	}
	s.seen = true
	handled, _, err := s.in.before(s.Context(), s.name, m)
	if !handled {
		return nil
	}
	s.handled = true
	if err == nil {
		err = status.Errorf(codes.Internal, "faults: a reactor handled the stream %s without an error", s.name)
	}
	return err
}
