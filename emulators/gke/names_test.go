package gke

import (
	"strings"
	"testing"
)

// The instance group names GKE gave pools in the recordings of real GKE
// traffic that testdata/replay holds (their 8 hex are GKE's own hash).
func TestInstanceGroupName(t *testing.T) {
	tests := []struct {
		cluster, pool, want string
	}{
		// containernodepool/containernodepool at 675a7c5c: both names long.
		{"cluster-sample-duutp", "nodepool-sample-duutp", "gke-cluster-sample-d-nodepool-sample--HASH-grp"},
		{"cluster-sample-duutp", "default-pool", "gke-cluster-sample-duutp-default-pool-HASH-grp"},
		// containercluster-minimal at ec377bc8: a short pool leaves the
		// cluster the rest of the 32 characters.
		{"containercluster-qid7k", "default-pool", "gke-containercluster-qid-default-pool-HASH-grp"},
		// containernodepool-subnetworkref at 460da517.
		{"cluster-sample-cggzd", "containernodepool-sample-cggzd", "gke-cluster-sample-c-containernodepoo-HASH-grp"},
		// A short cluster leaves the pool the rest.
		{"c1", "a-very-long-node-pool-name-of-forty-char", "gke-c1-a-very-long-node-pool-name-of--HASH-grp"},
		{"c1", "p1", "gke-c1-p1-HASH-grp"},
	}
	for _, tt := range tests {
		got := instanceGroupName(tt.cluster, tt.pool, "id", "uid", "us-central1-a")
		hash := groupHash("id", "uid", "us-central1-a")
		if want := strings.Replace(tt.want, "HASH", hash, 1); got != want || len(got) > 63 {
			t.Errorf("instanceGroupName(%q, %q) = %q, want %q (at most 63 characters)", tt.cluster, tt.pool, got, want)
		}
	}
	if a, b := groupHash("id", "uid", "us-central1-a"), groupHash("id", "uid", "us-central1-b"); a == b {
		t.Errorf("groupHash is %s in two zones, want one per zone", a)
	}
}
