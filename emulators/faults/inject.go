package faults

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// AnyMethod names every method of an Injector in a Fault.
const AnyMethod = "*"

// Action is what a Fault does to the calls it hits.
type Action string

// The actions of a Fault.
const (
	// Fail answers the call with the fault's code before the emulator
	// sees it.
	Fail Action = "fail"
	// Lose lets the emulator serve the call, then answers the caller
	// with the fault's code instead of the emulator's answer.
	Lose Action = "lose"
	// Delay waits the fault's latency before the call goes on.
	Delay Action = "latency"
)

// Fault is a fault injected into calls by Inject, and as Faults lists it.
type Fault struct {
	// ID names the fault for Remove; Inject gives it.
	ID string
	// Method is a method's name as its service names it ("Commit"), or
	// AnyMethod.
	Method string
	Action Action
	// Code and Message are the status a Fail or Lose answers (Message:
	// the code's usual words when empty).
	Code    codes.Code
	Message string
	// Latency is how long a Delay waits.
	Latency time.Duration
	// Count, when positive, is how many calls the fault hits before it
	// is removed; otherwise it stays until removed.
	Count int
	// Share, when positive, is each call's chance (up to 1) of being hit;
	// 0 hits every call.
	Share float64
	// Seed, when not nil, seeds the draws of Share, so that the same
	// calls in the same order are hit again.
	Seed *uint64
	// Hits is how many calls the fault has hit so far (set by Faults).
	Hits int
}

// ErrUnknownMethod is Inject's error for a method that the Injector's
// service does not have (SetMethods).
var ErrUnknownMethod = errors.New("faults: unknown method")

// injected is a Fault in its method's list.
type injected struct {
	f   Fault
	rng *rand.Rand // nil: every call is hit
	// left is how many more calls it may hit; negative for no limit.
	left int
}

// hit draws whether the fault hits a call, and counts the hit. Must be
// called with the Injector's lock held; the caller removes the fault once
// it is spent.
func (e *injected) hit() bool {
	if e.left == 0 || e.rng != nil && e.rng.Float64() >= e.f.Share {
		return false
	}
	e.f.Hits++
	if e.left > 0 {
		e.left--
	}
	return true
}

func (e *injected) spent() bool { return e.left == 0 }

// SetMethods declares the methods of the Injector's service, so that
// Inject refuses any other name. Without it, Inject takes any name.
func (in *Injector) SetMethods(names []string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.known = slices.Clone(names)
	slices.Sort(in.known)
}

// Methods is the methods declared by SetMethods, sorted.
func (in *Injector) Methods() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.known)
}

// MethodsOf is the names of every method s serves, of all its services,
// as SetMethods takes them. Call it once the services are registered.
func MethodsOf(s *grpc.Server) []string {
	var out []string
	for _, si := range s.GetServiceInfo() {
		for _, m := range si.Methods {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Inject adds f to the faults of its method (AnyMethod: of every method)
// and returns its ID. A Fail is offered each call after the reactors of
// AddReactor and FailNext, a Lose after the losses of LoseNext and
// LoseShare, and a Delay adds its latency to SetLatency's; the faults of
// AnyMethod come after the method's own. It refuses a method that
// SetMethods did not declare (ErrUnknownMethod), an unknown action, an OK
// code and a share or latency out of range.
func (in *Injector) Inject(f Fault) (string, error) {
	switch f.Action {
	case Fail, Lose:
		if f.Code == codes.OK || f.Code > codes.Unauthenticated {
			return "", fmt.Errorf("faults: %s with code %v: want an error code", f.Action, f.Code)
		}
		if f.Message == "" {
			f.Message = DefaultMessage(f.Code)
		}
	case Delay:
		if f.Latency <= 0 {
			return "", fmt.Errorf("faults: latency %v: want a positive duration", f.Latency)
		}
	default:
		return "", fmt.Errorf("faults: unknown action %q", f.Action)
	}
	if f.Share < 0 || f.Share > 1 {
		return "", fmt.Errorf("faults: share %v: want 0 to 1", f.Share)
	}
	e := &injected{left: -1}
	if f.Count > 0 {
		e.left = f.Count
	}
	if f.Share > 0 && f.Share < 1 {
		seed := rand.Uint64()
		if f.Seed != nil {
			seed = *f.Seed
		}
		e.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if f.Method != AnyMethod && in.known != nil {
		if _, ok := slices.BinarySearch(in.known, f.Method); !ok {
			return "", fmt.Errorf("%w %q", ErrUnknownMethod, f.Method)
		}
	}
	in.lastID++
	f.ID, f.Hits = strconv.Itoa(in.lastID), 0
	e.f = f
	m := in.method(f.Method)
	m.injected = append(m.injected, e)
	return f.ID, nil
}

// Faults is the faults injected by Inject that are still active, in the
// order they were injected, with the calls each has hit.
func (in *Injector) Faults() []Fault {
	in.mu.Lock()
	defer in.mu.Unlock()
	var all []*injected
	for _, m := range in.methods {
		all = append(all, m.injected...)
	}
	slices.SortFunc(all, func(a, b *injected) int {
		x, _ := strconv.Atoi(a.f.ID)
		y, _ := strconv.Atoi(b.f.ID)
		return x - y
	})
	out := make([]Fault, len(all))
	for i, e := range all {
		out[i] = e.f
		if e.f.Seed != nil {
			s := *e.f.Seed
			out[i].Seed = &s
		}
	}
	return out
}

// Remove removes the fault of Inject named id, and reports whether it
// was active.
func (in *Injector) Remove(id string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, m := range in.methods {
		for i, e := range m.injected {
			if e.f.ID == id {
				m.injected = slices.Delete(m.injected, i, i+1)
				return true
			}
		}
	}
	return false
}

// pick returns the first of the faults of action in lists (the method's,
// then AnyMethod's) that hits the call, removing it once spent. Must be
// called with the lock held.
func pick(action Action, lists ...*method) *Fault {
	for _, m := range lists {
		for i, e := range m.injected {
			if e.f.Action != action || !e.hit() {
				continue
			}
			f := e.f
			if e.spent() {
				m.injected = slices.Delete(m.injected, i, i+1)
			}
			return &f
		}
	}
	return nil
}

// delay is the latency of the Delay faults that hit a call, removing
// those spent. Must be called with the lock held.
func delay(lists ...*method) time.Duration {
	var d time.Duration
	for _, m := range lists {
		for _, e := range m.injected {
			if e.f.Action == Delay && e.hit() {
				d += e.f.Latency
			}
		}
		m.injected = slices.DeleteFunc(m.injected, (*injected).spent)
	}
	return d
}

func (f *Fault) err() error { return status.Error(f.Code, f.Message) }

// DefaultMessage is the words Google's services answer with code, as an
// injected fault's status says them when given none.
func DefaultMessage(c codes.Code) string {
	switch c {
	case codes.Unavailable:
		return "The service is currently unavailable."
	case codes.DeadlineExceeded:
		return "Deadline exceeded."
	case codes.ResourceExhausted:
		return "Quota exceeded."
	case codes.Internal:
		return "Internal error encountered."
	case codes.Aborted:
		return "Transaction aborted."
	case codes.PermissionDenied:
		return "The caller does not have permission."
	case codes.Unauthenticated:
		return "Request had invalid authentication credentials."
	}
	return "Injected " + codeName(c) + "."
}

// codeNames are the codes' names as gRPC spells them (UNAVAILABLE).
var codeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
	codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
	codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
	codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
	codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
	codes.Unauthenticated: "UNAUTHENTICATED",
}

func codeName(c codes.Code) string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return c.String()
}

// ParseCode is the code named name as gRPC spells it (UNAVAILABLE,
// DEADLINE_EXCEEDED); false for another name.
func ParseCode(name string) (codes.Code, bool) {
	for c, n := range codeNames {
		if n == name {
			return c, true
		}
	}
	return 0, false
}

// CodeName is c's name as gRPC spells it (UNAVAILABLE), as ParseCode
// takes it.
func CodeName(c codes.Code) string { return codeName(c) }
