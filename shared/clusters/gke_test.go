package clusters

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestFault(t *testing.T) {
	tests := []struct {
		name      string
		code      codes.Code
		msg       string
		transient bool
	}{
		{"unknown machine type", codes.InvalidArgument, `Machine type "e2-nonexistent" does not exist.`, false},
		{"service down", codes.Unavailable, "unavailable", true},
		{"incompatible operation", codes.FailedPrecondition, "Cluster is running incompatible operation", true},
		{"cluster being created", codes.FailedPrecondition, "Operation operation-1796152137736-bf28fca2 is currently creating cluster c. Please wait and try again once it is done.", true},
		{"pool being created", codes.FailedPrecondition, "Operation operation-1533161820212-e0451fc6 is currently creating a node pool for cluster c. Please wait and try again once it is done.", true},
		// GKE's words for a cluster running another operation
		// (cilium/cilium#14348), as the simulator now answers.
		{"cluster operated on", codes.FailedPrecondition, "Operation operation-1607703873446-35b09f92 is currently operating on cluster c. Please wait and try again once it is done.", true},
		{"unsupported version", codes.InvalidArgument, `Master version "1.29.1-gke.100" is unsupported.`, false},
		{"missing pool", codes.NotFound, `Not found: node pool "a" not found.`, true},
		{"rate limit", codes.ResourceExhausted, "Quota exceeded for quota metric 'Requests' and limit 'Requests per minute' of service 'container.googleapis.com' for consumer 'project:p'.", true},
		{"too many operations", codes.ResourceExhausted, `Too many operations: cluster "c" hits the concurrent operations quota 5, please try again later.`, true},
		{"zone out of stock", codes.ResourceExhausted, "ZONE_RESOURCE_POOL_EXHAUSTED: The zone does not have enough resources available to fulfill the request.", true},
		// A stockout passes whatever code GKE gives it: it keeps creating the nodes.
		{"stockout under another code", codes.InvalidArgument, "Google Compute Engine: Not all instances running in IGM after 56.02936237s. Expect 3. Current errors: [GCE_STOCKOUT]: Instance 'gke-nha-2020-user-8565ecfe-phhk' creation failed: The zone 'projects/p/zones/us-east1-c' does not have enough resources available to fulfill the request. '(resource type:compute)'.", true},
		{"regional CPU quota", codes.ResourceExhausted, `Insufficient regional quota to satisfy request: resource "CPUS": request requires '48.0' and is short '16.0'. project has a quota of '32.0' with '32.0' available.`, false},
		{"GPU quota", codes.ResourceExhausted, "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally.", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fault(status.Error(tt.code, tt.msg))
			if f.Transient != tt.transient || f.Message != tt.msg {
				t.Errorf("fault = %+v, want transient %v with the provider's message", f, tt.transient)
			}
		})
	}
}

// GKE links operations by the project's number, and zonal ones under
// zones/ (recorded of real GKE in GoogleCloudPlatform/k8s-config-connector,
// commit 675a7c5c84d8050ae9d0b1a955bf5ff82714548a,
// pkg/test/resourcefixture/testdata/basic/container/v1beta1/containernodepool/containernodepool/_http.log).
func TestSameTarget(t *testing.T) {
	const (
		cluster = "projects/p/locations/us-central1/clusters/c"
		pool    = cluster + "/nodePools/a"
	)
	tests := []struct {
		link, name string
		want       bool
	}{
		{"https://container.googleapis.com/v1/projects/123456789012/locations/us-central1/clusters/c", cluster, true},
		{"https://container.googleapis.com/v1/projects/123456789012/zones/us-central1-a/clusters/c", "projects/p/locations/us-central1-a/clusters/c", true},
		{"https://container.googleapis.com/v1/projects/123456789012/locations/us-central1/clusters/c/nodePools/a", pool, true},
		{"https://container.googleapis.com/v1/projects/p/locations/us-central1/clusters/c/nodePools/a", pool, true},
		{"https://container.googleapis.com/v1/projects/123456789012/locations/us-central1/clusters/c/nodePools/a", cluster, false},
		{"https://container.googleapis.com/v1/projects/123456789012/locations/us-central1/clusters/c", pool, false},
		{"https://container.googleapis.com/v1/projects/123456789012/locations/us-central1/clusters/xc", cluster, false},
		{"https://container.googleapis.com/v1/projects/123456789012/locations/us-central1/clusters/c/nodePools/ba", pool, false},
	}
	for _, tt := range tests {
		if got := sameTarget(tt.link, tt.name); got != tt.want {
			t.Errorf("sameTarget(%q, %q) = %v, want %v", tt.link, tt.name, got, tt.want)
		}
	}
}
