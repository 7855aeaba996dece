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
		{"rate limit", codes.ResourceExhausted, "Quota exceeded for quota metric 'Requests' and limit 'Requests per minute' of service 'container.googleapis.com' for consumer 'project:p'.", true},
		{"too many operations", codes.ResourceExhausted, `Too many operations: cluster "c" hits the concurrent operations quota 5, please try again later.`, true},
		{"zone out of stock", codes.ResourceExhausted, "ZONE_RESOURCE_POOL_EXHAUSTED: The zone does not have enough resources available to fulfill the request.", true},
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
