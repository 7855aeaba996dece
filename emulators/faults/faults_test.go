package faults

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// call makes one call of method through in's unary interceptor, to a
// handler that answers "served" and counts its calls in served.
func call(ctx context.Context, in *Injector, method string, req any, served *int) (any, error) {
	info := &grpc.UnaryServerInfo{FullMethod: "/google.test.v1.Service/" + method}
	return in.UnaryInterceptor(ctx, req, info, func(context.Context, any) (any, error) {
		*served++
		return "served", nil
	})
}

// onlyFor handles the calls whose request is req, with code.
type onlyFor struct {
	req  string
	code codes.Code
}

func (o onlyFor) React(req any) (bool, any, error) {
	if p, ok := req.(*string); ok { // a stream's message
		req = *p
	}
	if req != o.req {
		return false, nil, nil
	}
	return true, nil, status.Error(o.code, "only for "+o.req)
}

// answer handles every call with a response of its own.
type answer struct{}

func (answer) React(any) (bool, any, error) { return true, "reacted", nil }

// neither handles every call with neither a response nor an error.
type neither struct{}

func (neither) React(any) (bool, any, error) { return true, nil, nil }

func TestInjector(t *testing.T) {
	type step struct {
		method string
		req    string
		want   codes.Code
		resp   string // when want is OK
	}
	tests := []struct {
		name   string
		inject func(in *Injector)
		calls  []step
		served int // calls that reached the handler
	}{
		{
			name:   "nothing injected",
			inject: func(*Injector) {},
			calls:  []step{{"Get", "a", codes.OK, "served"}, {"Get", "a", codes.OK, "served"}},
			served: 2,
		},
		{
			name:   "next n calls, then through",
			inject: func(in *Injector) { in.FailNext("Get", 2, codes.Unavailable, "try again") },
			calls:  []step{{"Get", "a", codes.Unavailable, ""}, {"Get", "a", codes.Unavailable, ""}, {"Get", "a", codes.OK, "served"}},
			served: 1,
		},
		{
			name:   "only the method named",
			inject: func(in *Injector) { in.FailNext("Get", 1, codes.Unavailable, "try again") },
			calls:  []step{{"List", "a", codes.OK, "served"}, {"Get", "a", codes.Unavailable, ""}},
			served: 1,
		},
		{
			name: "FailNext calls add up, consulted in order",
			inject: func(in *Injector) {
				in.FailNext("Get", 1, codes.Unavailable, "first")
				in.FailNext("Get", 2, codes.PermissionDenied, "second")
			},
			calls:  []step{{"Get", "a", codes.Unavailable, ""}, {"Get", "a", codes.PermissionDenied, ""}, {"Get", "a", codes.PermissionDenied, ""}, {"Get", "a", codes.OK, "served"}},
			served: 1,
		},
		{
			name:   "zero calls inject nothing",
			inject: func(in *Injector) { in.FailNext("Get", 0, codes.Unavailable, "none") },
			calls:  []step{{"Get", "a", codes.OK, "served"}},
			served: 1,
		},
		{
			name:   "every call",
			inject: func(in *Injector) { in.AddReactor("Get", Error(codes.Internal, "boom")) },
			calls:  []step{{"Get", "a", codes.Internal, ""}, {"Get", "a", codes.Internal, ""}, {"Get", "a", codes.Internal, ""}},
			served: 0,
		},
		{
			name: "a reactor that passes leaves the call to the next",
			inject: func(in *Injector) {
				in.AddReactor("Get", onlyFor{"b", codes.NotFound})
				in.FailNext("Get", 1, codes.Unavailable, "next")
			},
			calls:  []step{{"Get", "b", codes.NotFound, ""}, {"Get", "a", codes.Unavailable, ""}, {"Get", "a", codes.OK, "served"}, {"Get", "b", codes.NotFound, ""}},
			served: 1,
		},
		{
			name: "an earlier reactor that handles the call spares a later FailNext",
			inject: func(in *Injector) {
				in.AddReactor("Get", onlyFor{"b", codes.NotFound})
				in.FailNext("Get", 1, codes.Unavailable, "next")
			},
			calls:  []step{{"Get", "b", codes.NotFound, ""}, {"Get", "b", codes.NotFound, ""}, {"Get", "a", codes.Unavailable, ""}},
			served: 0,
		},
		{
			name:   "a reactor's response",
			inject: func(in *Injector) { in.AddReactor("Get", answer{}) },
			calls:  []step{{"Get", "a", codes.OK, "reacted"}},
			served: 0,
		},
		{
			name:   "a reactor's nothing is an internal error",
			inject: func(in *Injector) { in.AddReactor("Get", neither{}) },
			calls:  []step{{"Get", "a", codes.Internal, ""}},
			served: 0,
		},
		{
			name: "RemoveFaults",
			inject: func(in *Injector) {
				in.AddReactor("Get", Error(codes.Internal, "boom"))
				in.FailNext("List", 5, codes.Internal, "boom")
				in.SetLatency("Get", time.Hour)
				in.RemoveFaults()
			},
			calls:  []step{{"Get", "a", codes.OK, "served"}, {"List", "a", codes.OK, "served"}},
			served: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in Injector
			tt.inject(&in)
			served := 0
			want := map[string]int{}
			for i, s := range tt.calls {
				resp, err := call(context.Background(), &in, s.method, s.req, &served)
				if got := status.Code(err); got != s.want {
					t.Errorf("call %d of %s(%s) = %v, want %v", i, s.method, s.req, err, s.want)
				}
				if s.want == codes.OK && resp != s.resp {
					t.Errorf("call %d of %s(%s) answered %v, want %v", i, s.method, s.req, resp, s.resp)
				}
				want[s.method]++
			}
			if served != tt.served {
				t.Errorf("calls served = %d, want %d", served, tt.served)
			}
			for m, n := range want {
				if got := in.Calls(m); got != n {
					t.Errorf("Calls(%s) = %d, want %d", m, got, n)
				}
			}
		})
	}
}

func TestFailNextMessage(t *testing.T) {
	var in Injector
	in.FailNext("Get", 1, codes.ResourceExhausted, "Quota exceeded")
	served := 0
	_, err := call(context.Background(), &in, "Get", "a", &served)
	if s := status.Convert(err); s.Code() != codes.ResourceExhausted || s.Message() != "Quota exceeded" {
		t.Errorf("call = %v, want ResourceExhausted with the message given", err)
	}
}

func TestLatency(t *testing.T) {
	const d = 50 * time.Millisecond
	var in Injector
	in.SetLatency("Get", time.Hour)
	in.SetLatency("Get", d) // replaces the hour
	in.FailNext("Get", 1, codes.Unavailable, "slow and failing")
	served := 0
	start := time.Now()
	if _, err := call(context.Background(), &in, "Get", "a", &served); status.Code(err) != codes.Unavailable {
		t.Errorf("delayed call = %v, want Unavailable: the latency comes before the reactors", err)
	}
	if took := time.Since(start); took < d || took > time.Hour/2 {
		t.Errorf("delayed call took %v, want %v", took, d)
	}

	// A caller that gives up ends the call, and no reactor sees it.
	in.FailNext("Get", 1, codes.Unavailable, "after the wait")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := call(ctx, &in, "Get", "a", &served); status.Code(err) != codes.Canceled {
		t.Errorf("cancelled call = %v, want Canceled", err)
	}
	if _, err := call(context.Background(), &in, "Get", "a", &served); status.Code(err) != codes.Unavailable {
		t.Errorf("next call = %v, want the fault the cancelled call did not take", err)
	}

	in.SetLatency("Get", 0)
	start = time.Now()
	if _, err := call(context.Background(), &in, "Get", "a", &served); err != nil {
		t.Errorf("call without latency = %v", err)
	}
	if took := time.Since(start); took >= d {
		t.Errorf("call without latency took %v, want under %v", took, d)
	}
	if got := in.Calls("Get"); got != 4 {
		t.Errorf("Calls(Get) = %d, want 4", got)
	}
}

// fakeStream is a server stream whose client sends msgs, one a RecvMsg.
type fakeStream struct {
	grpc.ServerStream
	msgs []string
}

func (f *fakeStream) Context() context.Context     { return context.Background() }
func (f *fakeStream) SetHeader(metadata.MD) error  { return nil }
func (f *fakeStream) SendHeader(metadata.MD) error { return nil }
func (f *fakeStream) SendMsg(any) error            { return nil }
func (f *fakeStream) RecvMsg(m any) error {
	if len(f.msgs) == 0 {
		return errors.New("end of stream")
	}
	*(m.(*string)), f.msgs = f.msgs[0], f.msgs[1:]
	return nil
}

func TestStream(t *testing.T) {
	var in Injector
	in.AddReactor("Listen", onlyFor{"b", codes.Unavailable})
	info := &grpc.StreamServerInfo{FullMethod: "/google.test.v1.Service/Listen"}
	tests := []struct {
		msgs []string
		want codes.Code
	}{
		{[]string{"a", "b"}, codes.OK}, // only the first message is offered
		{[]string{"b", "a"}, codes.Unavailable},
	}
	for _, tt := range tests {
		var got []string
		err := in.StreamInterceptor(nil, &fakeStream{msgs: tt.msgs}, info, func(_ any, ss grpc.ServerStream) error {
			for range tt.msgs {
				var m string
				if err := ss.RecvMsg(&m); err != nil {
					return err
				}
				got = append(got, m)
			}
			return nil
		})
		if status.Code(err) != tt.want {
			t.Errorf("stream of %v = %v (received %v), want %v", tt.msgs, err, got, tt.want)
		}
	}
	if n := in.Calls("Listen"); n != 2 {
		t.Errorf("Calls(Listen) = %d, want 2", n)
	}
}
