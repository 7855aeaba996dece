package substrates

import (
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// A run that applies a newer generation and leaves the substrate ready
// converged the change that asked for it; any other run, none.
func TestSubstrateConverged(t *testing.T) {
	asked := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sub := func(st resource.State, applied int64) model.Substrate {
		return model.Substrate{Spec: model.SubstrateSpec{Generation: 2, UpdatedAt: asked}, Status: model.SubstrateStatus{State: st, Applied: applied}}
	}
	for _, c := range []struct {
		name          string
		before, after model.Substrate
		want          time.Time
	}{
		{"first ready", sub(resource.StateProvisioning, 0), sub(resource.StateReady, 2), asked},
		{"a change applied while ready", sub(resource.StateReady, 1), sub(resource.StateReady, 2), asked},
		{"steady", sub(resource.StateReady, 2), sub(resource.StateReady, 2), time.Time{}},
		{"back from the cluster's upgrade", sub(resource.StateUpdating, 2), sub(resource.StateReady, 2), time.Time{}},
		{"applied but failed", sub(resource.StateUpdating, 1), sub(resource.StateError, 2), time.Time{}},
	} {
		if got := converged(&c.before, &c.after); !got.Equal(c.want) {
			t.Errorf("%s: converged %v, want %v", c.name, got, c.want)
		}
	}
}

type sent struct{}

func (sent) Send([]event.Event) {}
