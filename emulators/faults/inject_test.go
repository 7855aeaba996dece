package faults

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func mustInject(t *testing.T, in *Injector, f Fault) string {
	t.Helper()
	id, err := in.Inject(f)
	if err != nil {
		t.Fatalf("Inject(%+v): %v", f, err)
	}
	return id
}

func TestInjectCount(t *testing.T) {
	var in Injector
	fail := mustInject(t, &in, Fault{Method: "Create", Action: Fail, Code: codes.Unavailable, Count: 2})
	lose := mustInject(t, &in, Fault{Method: "Create", Action: Lose, Code: codes.DeadlineExceeded, Count: 1})
	var served int
	want := []struct {
		code   codes.Code
		served int
	}{
		{codes.Unavailable, 0},
		{codes.Unavailable, 0},
		{codes.DeadlineExceeded, 1}, // served, and its answer lost
		{codes.OK, 2},
	}
	for i, w := range want {
		if i == 1 {
			if got := in.Faults(); len(got) != 2 || got[0].ID != fail || got[0].Hits != 1 || got[1].ID != lose || got[1].Hits != 0 {
				t.Errorf("Faults after one call = %+v, want %s with 1 hit, then %s with none", got, fail, lose)
			}
		}
		_, err := call(context.Background(), &in, "Create", "req", &served)
		if status.Code(err) != w.code || served != w.served {
			t.Errorf("call %d = %v (served %d), want %v (served %d)", i+1, err, served, w.code, w.served)
		}
	}
	if got := in.Faults(); len(got) != 0 {
		t.Errorf("Faults once spent = %+v, want none", got)
	}
	if in.Lost("Create") != 1 {
		t.Errorf("Lost = %d, want 1", in.Lost("Create"))
	}
	if s := status.Convert(mustFail(t, &in, Fault{Method: "Create", Action: Fail, Code: codes.Unavailable, Count: 1})); s.Message() != DefaultMessage(codes.Unavailable) {
		t.Errorf("message = %q, want the code's usual words", s.Message())
	}
}

// mustFail injects f and returns the error of the next call.
func mustFail(t *testing.T, in *Injector, f Fault) error {
	t.Helper()
	mustInject(t, in, f)
	var served int
	_, err := call(context.Background(), in, f.Method, "req", &served)
	return err
}

func TestInjectAnyMethodAndRemove(t *testing.T) {
	var in Injector
	in.SetMethods([]string{"Get", "List"})
	id := mustInject(t, &in, Fault{Method: AnyMethod, Action: Fail, Code: codes.Internal})
	var served int
	for _, m := range []string{"Get", "List", "Get"} {
		if _, err := call(context.Background(), &in, m, "req", &served); status.Code(err) != codes.Internal {
			t.Errorf("%s = %v, want Internal", m, err)
		}
	}
	if f := in.Faults(); len(f) != 1 || f[0].Hits != 3 || f[0].Method != AnyMethod {
		t.Errorf("Faults = %+v, want the one of every method with 3 hits", f)
	}
	if in.Remove("nonesuch") || !in.Remove(id) || in.Remove(id) {
		t.Errorf("Remove: want true for the active fault only, once")
	}
	if _, err := call(context.Background(), &in, "Get", "req", &served); err != nil {
		t.Errorf("after Remove: %v", err)
	}

	for _, f := range []Fault{
		{Method: "Nonesuch", Action: Fail, Code: codes.Internal},
		{Method: "Get", Action: "explode", Code: codes.Internal},
		{Method: "Get", Action: Fail, Code: codes.OK},
		{Method: "Get", Action: Lose},
		{Method: "Get", Action: Delay},
		{Method: "Get", Action: Fail, Code: codes.Internal, Share: 1.5},
	} {
		if _, err := in.Inject(f); err == nil {
			t.Errorf("Inject(%+v) = nil, want an error", f)
		}
	}
	if _, err := in.Inject(Fault{Method: "Nonesuch", Action: Fail, Code: codes.Internal}); !errors.Is(err, ErrUnknownMethod) {
		t.Errorf("Inject of an unknown method = %v, want ErrUnknownMethod", err)
	}
	mustInject(t, &in, Fault{Method: "List", Action: Delay, Latency: time.Second})
	in.RemoveFaults()
	if f := in.Faults(); len(f) != 0 {
		t.Errorf("Faults after RemoveFaults = %+v", f)
	}
}

// hits is which of n calls of Get a fault of share with seed hits.
func hits(t *testing.T, action Action, share float64, seed uint64, n int) []bool {
	t.Helper()
	var in Injector
	mustInject(t, &in, Fault{Method: "Get", Action: action, Code: codes.Unavailable, Share: share, Seed: &seed})
	out := make([]bool, n)
	var served int
	for i := range out {
		_, err := call(context.Background(), &in, "Get", "req", &served)
		out[i] = status.Code(err) == codes.Unavailable
	}
	return out
}

func TestInjectSeededShare(t *testing.T) {
	for _, action := range []Action{Fail, Lose} {
		a, b, c := hits(t, action, 0.3, 7, 400), hits(t, action, 0.3, 7, 400), hits(t, action, 0.3, 8, 400)
		n, same := 0, true
		for i := range a {
			if a[i] {
				n++
			}
			same = same && a[i] == c[i]
			if a[i] != b[i] {
				t.Fatalf("%s: call %d hit %v then %v with the same seed", action, i, a[i], b[i])
			}
		}
		// Binomial(400, 0.3): 80..160 is more than 4 standard deviations.
		if n < 80 || n > 160 {
			t.Errorf("%s: %d of 400 calls hit, want about 120", action, n)
		}
		if same {
			t.Errorf("%s: seeds 7 and 8 hit the same calls", action)
		}
	}
}

func TestInjectDelay(t *testing.T) {
	const d = 30 * time.Millisecond
	var in Injector
	mustInject(t, &in, Fault{Method: AnyMethod, Action: Delay, Latency: d})
	mustInject(t, &in, Fault{Method: "Get", Action: Delay, Latency: d, Count: 1})
	var served int
	for i, want := range []time.Duration{2 * d, d} {
		start := time.Now()
		if _, err := call(context.Background(), &in, "Get", "req", &served); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < want || took > want+time.Second {
			t.Errorf("call %d took %v, want %v", i+1, took, want)
		}
	}
	if f := in.Faults(); len(f) != 1 || f[0].Hits != 2 {
		t.Errorf("Faults = %+v, want the lasting latency with 2 hits", f)
	}
}

func TestInjectLosesAStream(t *testing.T) {
	var in Injector
	mustInject(t, &in, Fault{Method: "Listen", Action: Lose, Code: codes.Unavailable, Count: 1})
	info := &grpc.StreamServerInfo{FullMethod: "/google.test.v1.Service/Listen"}
	served := 0
	serve := func(_ any, ss grpc.ServerStream) error {
		var m string
		if err := ss.RecvMsg(&m); err != nil {
			return err
		}
		served++
		return nil
	}
	for i, want := range []codes.Code{codes.Unavailable, codes.OK} {
		if err := in.StreamInterceptor(nil, &fakeStream{msgs: []string{"a"}}, info, serve); status.Code(err) != want {
			t.Errorf("stream %d = %v, want %v", i+1, err, want)
		}
	}
	if served != 2 || in.Lost("Listen") != 1 {
		t.Errorf("served %d, lost %d; want 2 served, 1 lost", served, in.Lost("Listen"))
	}
}

func TestParseCode(t *testing.T) {
	for _, c := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Internal} {
		if got, ok := ParseCode(CodeName(c)); !ok || got != c {
			t.Errorf("ParseCode(%q) = %v, %v; want %v", CodeName(c), got, ok, c)
		}
	}
	if _, ok := ParseCode("Unavailable"); ok {
		t.Errorf("ParseCode(Unavailable) took the Go spelling; want gRPC's alone")
	}
}
