package input

import (
	"encoding/json"
	"strconv"
	"testing"
)

func BenchmarkDecodeCreateNodePool(b *testing.B) {
	body, err := json.Marshal(with(createPool, obj{
		"autoscaling": obj{"minNodes": 1, "maxNodes": 4}, "diskGiB": 200, "diskType": "pd-balanced",
		"accelerators": obj{"type": "nvidia-l4", "count": 1}, "zones": []any{"us-central1-a", "us-central1-b"},
		"labels": labelsN(8), "taints": taintsN(4), "idempotencyKey": "req-1",
	}))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeCreateNodePool(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeCreateClusterTenPools(b *testing.B) {
	body, err := json.Marshal(with(createCluster, obj{"nodePools": pools(10), "labels": labelsN(8)}))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeCreateCluster(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeLargeBadBody decodes a body just under 1 MiB made of
// broken labels, taints and zones: the cost must stay linear in the size.
func BenchmarkDecodeLargeBadBody(b *testing.B) {
	n := 9000
	labels := obj{}
	for i := range n {
		labels["-bad"+strconv.Itoa(i)] = "x y"
	}
	taints := make([]any, n)
	for i := range taints {
		taints[i] = obj{"key": "k", "effect": "NoSchedule"}
	}
	body, err := json.Marshal(with(createPool, obj{"labels": labels, "taints": taints, "zones": list(n, func(int) string { return "z" })}))
	if err != nil {
		b.Fatal(err)
	}
	if len(body) > MaxBodyBytes {
		b.Fatalf("body of %d bytes is over the limit", len(body))
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := DecodeCreateNodePool(body); err == nil {
			b.Fatal("DecodeCreateNodePool(bad body) = nil error")
		}
	}
}
