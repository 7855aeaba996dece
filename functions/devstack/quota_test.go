package devstack_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// withTenant adds to the seed a tenant with its own pool on the
// platform's account (unless the seed has it), an admin, and its quota of
// clusters (none when nil).
func withTenant(seed *store.Seed, tenant, admin string, clusters *int) {
	pool := store.Pool{ID: "pool-" + tenant, TenantID: tenant, AccountID: "acc-gcp"}
	if !slices.Contains(seed.Pools, pool) {
		seed.Pools = append(seed.Pools, pool)
	}
	seed.RoleBindings = append(seed.RoleBindings, auth.Binding{TenantID: tenant, Principal: admin, Role: auth.RoleAdmin})
	seed.Tenants = append(seed.Tenants, store.Tenant{ID: tenant, Quota: model.Quota{Clusters: clusters}})
}

// tenantClient calls the API as the tenant's admin, on its own connections.
type tenantClient struct {
	*client
	tenant string
}

func (e *env) tenantClient(t testing.TB, tenant, principal string) *tenantClient {
	t.Helper()
	tok, err := e.Token(principal)
	if err != nil {
		t.Fatalf("Token(%s): %v", principal, err)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	return &tenantClient{client: &client{url: e.URL, token: tok, hc: hc}, tenant: tenant}
}

// create creates an autopilot cluster on the tenant's pool.
func (c *tenantClient) create(name, key string) (resource.Cluster, error) {
	body := map[string]any{"tenantId": c.tenant, "poolId": "pool-" + c.tenant, "name": name, "mode": "autopilot", "region": "us-central1"}
	if key != "" {
		body["idempotencyKey"] = key
	}
	var cl resource.Cluster
	err := c.call("kubernetesClusters/create", body, &cl)
	return cl, err
}

func (c *tenantClient) list() ([]resource.Cluster, error) {
	var out struct {
		Clusters []resource.Cluster `json:"clusters"`
	}
	err := c.call("kubernetesClusters/list", map[string]any{"tenantId": c.tenant, "pageSize": 100}, &out)
	return out.Clusters, err
}

// TestClusterQuotaInstances creates a tenant's clusters at once through
// the API of three instances: exactly its quota is let in, the rest are
// 429 QUOTA_EXCEEDED naming it; a keyed retry of one let in still gets its
// cluster, and a deleted cluster frees its place.
func TestClusterQuotaInstances(t *testing.T) {
	cfg := instancesConfig(3)
	withTenant(cfg.Seed, "initech", "peter", new(5))
	e := startEnv(t, cfg)
	c := e.tenantClient(t, "initech", "peter")
	for i := range 2 {
		if _, err := c.create(fmt.Sprintf("old-%d", i), ""); err != nil {
			t.Fatalf("create cluster: %v", err)
		}
	}
	kept, err := c.create("keyed", "key-1")
	if err != nil {
		t.Fatalf("create cluster: %v", err)
	}

	var (
		mu      sync.Mutex
		answers = map[string]int{}
		message string
		wg      sync.WaitGroup
	)
	start := make(chan struct{})
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := c.create(fmt.Sprintf("new-%d", i), "")
			mu.Lock()
			defer mu.Unlock()
			var ae *apiError
			switch {
			case err == nil:
				answers["200"]++
			case errors.As(err, &ae):
				answers[fmt.Sprintf("%d %s", ae.Status, ae.Code)]++
				message = ae.Message
			default:
				t.Errorf("create cluster: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if want := map[string]int{"200": 2, "429 QUOTA_EXCEEDED": 18}; fmt.Sprint(answers) != fmt.Sprint(want) {
		t.Errorf("20 creates at once with 3 of 5 clusters: answers %v, want %v", answers, want)
	}
	if want := "tenant initech has 5 clusters that are not deleted, its quota of clusters"; message != want {
		t.Errorf("QUOTA_EXCEEDED message = %q, want %q", message, want)
	}
	if got, err := c.list(); err != nil || len(got) != 5 {
		t.Errorf("list = %d clusters, %v; want 5", len(got), err)
	}

	again, err := c.create("keyed", "key-1")
	if err != nil || again.ID != kept.ID {
		t.Errorf("keyed retry at the quota = %s, %v; want cluster %s", again.ID, err, kept.ID)
	}

	if err := c.call("kubernetesClusters/delete", map[string]any{"tenantId": "initech", "clusterId": kept.ID}, nil); err != nil {
		t.Fatalf("delete cluster: %v", err)
	}
	wait.For(t, "the deleted cluster's place freed", func() (bool, string) {
		_, err := c.create("freed", "key-freed")
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if _, err := c.create("beyond", ""); err == nil || !strings.Contains(err.Error(), "QUOTA_EXCEEDED") {
		t.Errorf("create after the freed place was taken = %v, want QUOTA_EXCEEDED", err)
	}
}
