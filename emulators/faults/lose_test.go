package faults

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestLoseNext(t *testing.T) {
	in := &Injector{}
	in.FailNext("Create", 1, codes.PermissionDenied, "denied")
	in.LoseNext("Create", 2, codes.DeadlineExceeded, "deadline exceeded")
	var served int
	want := []struct {
		code   codes.Code
		served int
	}{
		{codes.PermissionDenied, 0}, // a reactor's call never reaches the emulator, and loses nothing
		{codes.DeadlineExceeded, 1},
		{codes.DeadlineExceeded, 2},
		{codes.OK, 3},
	}
	for i, w := range want {
		resp, err := call(context.Background(), in, "Create", "req", &served)
		if status.Code(err) != w.code || served != w.served {
			t.Errorf("call %d = %v, %v (served %d), want %v (served %d)", i+1, resp, err, served, w.code, w.served)
		}
	}
	if got := in.Lost("Create"); got != 2 {
		t.Errorf("Lost = %d, want 2", got)
	}
	if _, err := call(context.Background(), in, "Other", "req", &served); err != nil {
		t.Errorf("another method's call = %v, want its answer", err)
	}
}

func TestLoseShare(t *testing.T) {
	in := &Injector{}
	in.LoseShare("Create", 0.5, codes.Unavailable, "unavailable")
	var served, lost int
	const calls = 1000
	for range calls {
		if _, err := call(context.Background(), in, "Create", "req", &served); status.Code(err) == codes.Unavailable {
			lost++
		}
	}
	// Binomial(1000, 0.5): 350..650 is more than nine standard deviations.
	if served != calls || lost < 350 || lost > 650 || in.Lost("Create") != lost {
		t.Errorf("served %d, lost %d (Lost %d) of %d calls, want all served and about half lost", served, lost, in.Lost("Create"), calls)
	}
	in.RemoveFaults()
	if _, err := call(context.Background(), in, "Create", "req", &served); err != nil {
		t.Errorf("after RemoveFaults: %v, want the answer", err)
	}
	if in.Lost("Create") != lost {
		t.Errorf("RemoveFaults reset Lost to %d, want %d", in.Lost("Create"), lost)
	}
}
