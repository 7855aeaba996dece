package gke

import (
	"testing"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Each project has its own request quota per clock minute; calls past it
// are refused with RESOURCE_EXHAUSTED until the next minute, and the usage
// is reported per minute.
func TestRequestQuota(t *testing.T) {
	e := newEnv(t, WithRequestQuota(3))
	e.srv.SetRequestQuota("big", 5)
	get := func(project string) error {
		_, err := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: "projects/" + project + "/locations/us-central1/clusters/none"})
		return err
	}
	for _, tc := range []struct {
		project string
		served  int
	}{{"small", 3}, {"big", 5}} {
		for i := range tc.served + 2 {
			err := get(tc.project)
			code := status.Code(err)
			if i < tc.served && code != codes.NotFound {
				t.Errorf("%s call %d = %v, want NOT_FOUND (served)", tc.project, i+1, err)
			}
			if i >= tc.served && code != codes.ResourceExhausted {
				t.Errorf("%s call %d = %v, want RESOURCE_EXHAUSTED", tc.project, i+1, err)
			}
		}
	}
	e.clock.Step(time.Minute)
	if err := get("small"); status.Code(err) != codes.NotFound {
		t.Errorf("small's call in the next minute = %v, want it served", err)
	}
	got := e.srv.Usage("small")
	if len(got) != 2 || got[0].Calls != 3 || got[0].Refused != 2 || !got[0].Exceeded || got[0].Quota != 3 || got[1].Calls != 1 || got[1].Exceeded {
		t.Errorf("Usage(small) = %+v, want 3 served and 2 refused, then 1", got)
	}
	if ps := e.srv.Projects(); len(ps) != 2 || ps[0] != "big" || ps[1] != "small" {
		t.Errorf("Projects() = %v, want big, small", ps)
	}
}
