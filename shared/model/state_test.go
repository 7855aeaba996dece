package model

import (
	"testing"

	"github.com/better-compute/kubernetes/shared/resource"
)

const (
	pending      = resource.StatePending
	provisioning = resource.StateProvisioning
	ready        = resource.StateReady
	updating     = resource.StateUpdating
	deleting     = resource.StateDeleting
	deleted      = resource.StateDeleted
	failed       = resource.StateError
)

func cluster(st resource.State, observed, generation int64) Cluster {
	return Cluster{ID: "kcl_1", TenantID: "acme", Active: true,
		Spec:   ClusterSpec{Name: "prod", Mode: resource.ModeStandard, Version: generation, Generation: generation, PoolsCreated: 1},
		Status: ClusterStatus{State: st, Message: "m", ObservedGeneration: observed}}
}

func pool(name string, st resource.State, observed, generation int64) NodePool {
	return NodePool{ID: "knp_" + name, TenantID: "acme", ClusterID: "kcl_1", Active: true,
		Spec:   NodePoolSpec{Name: name, MachineType: "e2-standard-4", NodeCount: 1, Version: 1, Generation: generation},
		Status: NodePoolStatus{State: st, Message: "m", ObservedGeneration: observed}}
}

func TestClusterState(t *testing.T) {
	tests := []struct {
		name     string
		c        Cluster
		deleting bool
		want     resource.State
		wantMsg  string
	}{
		{"never looked at", cluster("", 0, 1), false, pending, ""},
		{"being created", cluster(provisioning, 1, 1), false, provisioning, "m"},
		{"tenant change while provisioning", cluster(provisioning, 1, 2), false, provisioning, "m"},
		{"ready", cluster(ready, 1, 1), false, ready, "m"},
		{"tenant change while ready", cluster(ready, 1, 2), false, updating, ""},
		{"tenant change while failed", cluster(failed, 1, 2), false, updating, ""},
		{"failed", cluster(failed, 1, 1), false, failed, "m"},
		{"deleting", cluster(ready, 1, 2), true, deleting, ""},
		{"deleted", cluster(deleted, 2, 2), true, deleted, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			c.Spec.Deleting = tt.deleting
			if st, msg := ClusterState(&c); st != tt.want || msg != tt.wantMsg {
				t.Errorf("ClusterState = %s %q, want %s %q", st, msg, tt.want, tt.wantMsg)
			}
		})
	}
}

func TestNodePoolState(t *testing.T) {
	tests := []struct {
		name     string
		p        NodePool
		deleting bool
		want     resource.State
	}{
		{"never looked at", pool("a", "", 0, 1), false, pending},
		{"resized while pending", pool("a", pending, 1, 2), false, pending},
		{"ready", pool("a", ready, 1, 1), false, ready},
		{"resized while ready", pool("a", ready, 1, 2), false, updating},
		{"resized while failed", pool("a", failed, 1, 2), false, updating},
		{"failed", pool("a", failed, 1, 1), false, failed},
		{"deleting", pool("a", ready, 1, 2), true, deleting},
		{"deleted", pool("a", deleted, 2, 2), true, deleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			p.Spec.Deleting = tt.deleting
			if st, _ := NodePoolState(&p); st != tt.want {
				t.Errorf("NodePoolState = %s, want %s", st, tt.want)
			}
		})
	}
}
