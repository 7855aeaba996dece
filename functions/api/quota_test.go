package api_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// setQuota sets the tenant's quota of clusters, as the seed command does.
func setQuota(t *testing.T, tenantID string, clusters int) {
	t.Helper()
	err := h.store.LoadSeed(context.Background(), &store.Seed{Tenants: []store.Tenant{{ID: tenantID, Quota: model.Quota{Clusters: &clusters}}}})
	if err != nil {
		t.Fatalf("LoadSeed(quota) = %v", err)
	}
}

// TestClusterQuota: a tenant's creates at once beyond its quota of
// clusters are 429 QUOTA_EXCEEDED naming it (an answer the document
// lists), a keyed retry of one let in still gets its cluster, and another
// tenant is not held to it.
func TestClusterQuota(t *testing.T) {
	tn := newTenant(t)
	setQuota(t, tn.ID, 3)
	kept := createCluster(t, with(standardCluster(tn, "kept"), "idempotencyKey", "kept-1"))

	tok := token(t, admin)
	out := make([]response, 10)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := send(http.MethodPost, "kubernetesClusters/create", "Bearer "+tok, standardCluster(tn, fmt.Sprintf("c%d", i)), nil)
			if err != nil {
				t.Errorf("create %d: %v", i, err)
			}
			out[i] = r
		}()
	}
	close(start)
	wg.Wait()
	if got, want := tally(out), map[string]int{"200 ": 2, "429 QUOTA_EXCEEDED": 8}; !reflect.DeepEqual(got, want) {
		t.Errorf("10 creates at once with 1 of 3 clusters: answers %v, want %v", got, want)
	}
	r := call(t, admin, "kubernetesClusters/create", standardCluster(tn, "more"))
	wantError(t, r, http.StatusTooManyRequests, "QUOTA_EXCEEDED")
	if want := fmt.Sprintf("tenant %s has 3 clusters that are not deleted, its quota of clusters", tn.ID); r.Message != want {
		t.Errorf("message = %q, want %q", r.Message, want)
	}

	var again resource.Cluster
	call(t, admin, "kubernetesClusters/create", with(standardCluster(tn, "kept"), "idempotencyKey", "kept-1")).decode(t, &again)
	if again.ID != kept.ID {
		t.Errorf("keyed retry at the quota = cluster %s, want %s", again.ID, kept.ID)
	}

	// The other tenant of the harness has no quota.
	var other resource.Cluster
	call(t, foreign, "kubernetesClusters/create", obj{"tenantId": tn.Other, "poolId": tn.OtherPool, "name": "free",
		"mode": "autopilot", "region": "us-central1"}).decode(t, &other)
}
