package client

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

func seqEvent(chain string, n int64) Event {
	attrs := map[string]string{"ce-id": fmt.Sprintf("evt_%s_%d", chain, n), "clusterId": chain}
	if n > 0 {
		attrs["ce-sequence"] = fmt.Sprintf("%020d", n)
	}
	return Event{Attributes: attrs}
}

// order returns, chain by chain, the numbers of the events handed on.
func order(events []Event) map[string][]int64 {
	out := map[string][]int64{}
	for _, e := range events {
		n, _ := e.Sequence()
		out[e.Chain()] = append(out[e.Chain()], n)
	}
	return out
}

// TestOrdererShuffled feeds two chains' events shuffled, each delivered
// once or twice: every event comes out once, in order, with no wait.
func TestOrdererShuffled(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		var in []Event
		for _, c := range []string{"kcl_a", "kcl_b"} {
			for n := int64(1); n <= 40; n++ {
				in = append(in, seqEvent(c, n))
				if r.IntN(3) == 0 {
					in = append(in, seqEvent(c, n)) // a redelivery
				}
			}
		}
		r.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
		o := NewOrderer(time.Hour, 0)
		now := time.Unix(0, 0)
		var out []Event
		for _, e := range in {
			got, gaps := o.Add(e, now)
			if len(gaps) > 0 {
				t.Fatalf("seed %d: gaps %v with nothing missing", seed, gaps)
			}
			out = append(out, got...)
		}
		want := make([]int64, 40)
		for i := range want {
			want[i] = int64(i + 1)
		}
		if got := order(out); !reflect.DeepEqual(got, map[string][]int64{"cluster/kcl_a": want, "cluster/kcl_b": want}) {
			t.Fatalf("seed %d: handed on %v, want 1..40 once per chain", seed, got)
		}
		if o.Held() != 0 {
			t.Fatalf("seed %d: %d events still held", seed, o.Held())
		}
	}
}

func TestOrdererGaps(t *testing.T) {
	t0 := time.Unix(0, 0)
	wait := 10 * time.Second
	tests := []struct {
		name  string
		in    []int64 // numbers added at t0
		flush time.Duration
		want  []int64 // handed on, Add's then Flush's
		gaps  []Gap
	}{
		{"in order", []int64{1, 2, 3}, 0, []int64{1, 2, 3}, nil},
		{"held until its predecessor", []int64{2, 3}, wait - time.Second, nil, nil},
		{"gap given up after the wait", []int64{1, 3, 4}, wait, []int64{1, 3, 4}, []Gap{{Chain: "cluster/c", From: 2, To: 2}}},
		{"a wider gap", []int64{1, 5}, wait, []int64{1, 5}, []Gap{{Chain: "cluster/c", From: 2, To: 4}}},
		// A reader that starts mid-stream knows nothing missing.
		{"first seen is not the first", []int64{8, 7}, wait, []int64{7, 8}, nil},
		{"duplicates dropped", []int64{1, 1, 2, 1, 2}, 0, []int64{1, 2}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOrderer(wait, 0)
			var out []Event
			var gaps []Gap
			for _, n := range tt.in {
				got, g := o.Add(seqEvent("c", n), t0)
				out, gaps = append(out, got...), append(gaps, g...)
			}
			got, g := o.Flush(t0.Add(tt.flush))
			out, gaps = append(out, got...), append(gaps, g...)
			if nums := order(out)["cluster/c"]; !reflect.DeepEqual(nums, tt.want) {
				t.Errorf("handed on %v, want %v", nums, tt.want)
			}
			if !reflect.DeepEqual(gaps, tt.gaps) {
				t.Errorf("gaps %v, want %v", gaps, tt.gaps)
			}
		})
	}
}

// TestOrdererBounded: a chain never holds more than its bound; past it the
// oldest gap is given up at once.
func TestOrdererBounded(t *testing.T) {
	o := NewOrderer(time.Hour, 3)
	t0 := time.Unix(0, 0)
	var out []Event
	var gaps []Gap
	for _, n := range []int64{1, 3, 4, 5, 6} {
		got, g := o.Add(seqEvent("c", n), t0)
		out, gaps = append(out, got...), append(gaps, g...)
	}
	if nums := order(out)["cluster/c"]; !reflect.DeepEqual(nums, []int64{1, 3, 4, 5, 6}) {
		t.Errorf("handed on %v, want 1, 3 to 6", nums)
	}
	if want := []Gap{{Chain: "cluster/c", From: 2, To: 2}}; !reflect.DeepEqual(gaps, want) {
		t.Errorf("gaps %v, want %v", gaps, want)
	}
	// 2 comes late: it was given up on, and is dropped.
	if got, _ := o.Add(seqEvent("c", 2), t0); len(got) != 0 {
		t.Errorf("a late event given up on was handed on: %v", got)
	}
}

// TestOrdererChains: a substrate's events count apart from its cluster's,
// and events without ce-sequence pass at once, once per ce-id.
func TestOrdererChains(t *testing.T) {
	o := NewOrderer(time.Hour, 0)
	t0 := time.Unix(0, 0)
	sub := seqEvent("kcl_a", 1)
	sub.Attributes["substrateId"] = "ksb_a"
	sub.Attributes["ce-id"] = "evt_sub"
	if got, _ := o.Add(seqEvent("kcl_a", 1), t0); len(got) != 1 {
		t.Fatalf("cluster event 1 not handed on")
	}
	if got, _ := o.Add(sub, t0); len(got) != 1 || got[0].Chain() != "substrate/ksb_a" {
		t.Fatalf("substrate event 1 not handed on in its own chain: %v", got)
	}
	plain := seqEvent("kcl_a", 0)
	if got, _ := o.Add(plain, t0); len(got) != 1 {
		t.Errorf("an event without ce-sequence was held")
	}
	if got, _ := o.Add(plain, t0); len(got) != 0 {
		t.Errorf("a redelivery without ce-sequence was handed on again")
	}
}

func TestEventSequence(t *testing.T) {
	for _, tt := range []struct {
		s  string
		n  int64
		ok bool
	}{
		{"00000000000000000001", 1, true},
		{"00000000000000000042", 42, true},
		{"00000000000000000000", 0, false},
		{"42", 0, false},
		{"0000000000000000004x", 0, false},
		{"", 0, false},
	} {
		n, ok := Event{Attributes: map[string]string{"ce-sequence": tt.s}}.Sequence()
		if n != tt.n || ok != tt.ok {
			t.Errorf("Sequence(%q) = %d, %v; want %d, %v", tt.s, n, ok, tt.n, tt.ok)
		}
	}
}

// ExampleOrderer puts events received out of order, one of them twice,
// back in the order of their ce-sequence.
func ExampleOrderer() {
	o := NewOrderer(10*time.Second, 0)
	now := time.Now()
	for _, n := range []string{"2", "1", "2", "3"} {
		e := Event{Attributes: map[string]string{"ce-id": "evt_" + n, "clusterId": "kcl_a", "ce-sequence": "0000000000000000000" + n}}
		ready, _ := o.Add(e, now)
		for _, r := range ready {
			fmt.Println(r.Attributes["ce-id"])
		}
	}
	// Output:
	// evt_1
	// evt_2
	// evt_3
}
