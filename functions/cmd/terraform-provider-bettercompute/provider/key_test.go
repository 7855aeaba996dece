package provider

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/better-compute/kubernetes/shared/client"
	"github.com/better-compute/kubernetes/shared/input"
)

func TestParseImportIDs(t *testing.T) {
	cases := []struct {
		id       string
		nodePool bool
		want     importRef
		ok       bool
	}{
		{id: clusterID, want: importRef{clusterID: clusterID}, ok: true},
		{id: "acme/" + clusterID, want: importRef{tenant: "acme", clusterID: clusterID}, ok: true},
		{id: "/" + clusterID},
		{id: "acme/" + clusterID + "/x"},
		{id: "kcl_"},
		{id: nodePoolID},
		{id: clusterID + "/" + nodePoolID, nodePool: true, want: importRef{clusterID: clusterID, nodePoolID: nodePoolID}, ok: true},
		{id: "acme/" + clusterID + "/" + nodePoolID, nodePool: true, want: importRef{tenant: "acme", clusterID: clusterID, nodePoolID: nodePoolID}, ok: true},
		{id: nodePoolID + "/" + clusterID, nodePool: true},
		{id: clusterID, nodePool: true},
		{id: "/" + clusterID + "/" + nodePoolID, nodePool: true},
		{id: "a/b/" + clusterID + "/" + nodePoolID, nodePool: true},
	}
	for _, c := range cases {
		parse := parseClusterImport
		if c.nodePool {
			parse = parseNodePoolImport
		}
		got, ok := parse(c.id)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("parse(%q, node pool %v) = %+v, %v; want %+v, %v", c.id, c.nodePool, got, ok, c.want, c.ok)
		}
	}
}

// TestIdempotencyKey checks that a create's key is the same for every
// request that means the same pool, differs for any other, and differs
// again after a deleted pool of the same request.
func TestIdempotencyKey(t *testing.T) {
	base := client.CreateNodePoolRequest{TenantID: "acme", ClusterID: clusterID, NodePoolSpec: client.NodePoolSpec{
		Name: "web", MachineType: "e2-standard-4", NodeCount: 2, Labels: map[string]string{"a": "1", "b": "2"}}}
	key := func(r client.CreateNodePoolRequest, after ...string) string {
		t.Helper()
		c, err := canonicalForm(r, input.DecodeCreateNodePool)
		if err != nil {
			t.Fatal(err)
		}
		return idempotencyKey("nodepool", c, after...)
	}
	k := key(base)
	if !regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`).MatchString(k) {
		t.Fatalf("key %q is not one the API takes", k)
	}
	same := base
	same.Zones, same.Taints = []string{}, []client.Taint{} // empty as omitted
	same.IdempotencyKey = "ignored"
	if got := key(same); got != k {
		t.Errorf("key of the same request = %q, want %q", got, k)
	}
	others := map[string]func(*client.CreateNodePoolRequest){
		"tenant":    func(r *client.CreateNodePoolRequest) { r.TenantID = "other" },
		"cluster":   func(r *client.CreateNodePoolRequest) { r.ClusterID = "kcl_01jd0000000000000000000001" },
		"name":      func(r *client.CreateNodePoolRequest) { r.Name = "api" },
		"nodeCount": func(r *client.CreateNodePoolRequest) { r.NodeCount = 3 },
		"label":     func(r *client.CreateNodePoolRequest) { r.Labels = map[string]string{"a": "1"} },
		"spot":      func(r *client.CreateNodePoolRequest) { r.Spot = true },
	}
	seen := map[string]string{k: "base"}
	for name, change := range others {
		r := base
		change(&r)
		got := key(r)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s: key %q is %s's too", name, got, prev)
		}
		seen[got] = name
	}
	next := key(base, nodePoolID)
	if next == k || key(base, nodePoolID) != next {
		t.Errorf("key after a deleted pool = %q (base %q): want another, the same every time", next, k)
	}
	if key(base, nodePoolID, "knp_x") == next {
		t.Error("key after two deleted pools = key after one")
	}
}

// TestSettings checks the provider's configuration is resolved as bc
// resolves its flags: the block, else the environment, else the config
// file bc login writes (BC_CONFIG, unless config_file names another).
func TestSettings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	if err := client.SaveConfig(file, client.Config{URL: "http://file", Tenant: "file-tenant", Token: "file-token"}); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(other, []byte("url: http://other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := func(v string) types.String {
		if v == "" {
			return types.StringNull()
		}
		return types.StringValue(v)
	}
	cases := []struct {
		name  string
		block providerModel
		env   map[string]string
		want  settings
	}{
		{"file", providerModel{}, map[string]string{"BC_CONFIG": file}, settings{"http://file", "file-tenant", "file-token"}},
		{"env over file", providerModel{}, map[string]string{"BC_CONFIG": file, "BC_URL": "http://env", "BC_TENANT": "env-tenant", "BC_TOKEN": "env-token"},
			settings{"http://env", "env-tenant", "env-token"}},
		{"block over env", providerModel{Endpoint: s("http://block"), Tenant: s("block-tenant"), Token: s("block-token")},
			map[string]string{"BC_CONFIG": file, "BC_URL": "http://env", "BC_TENANT": "env-tenant", "BC_TOKEN": "env-token"},
			settings{"http://block", "block-tenant", "block-token"}},
		{"config_file over BC_CONFIG", providerModel{ConfigFile: s(other)}, map[string]string{"BC_CONFIG": file}, settings{endpoint: "http://other"}},
		{"no file", providerModel{}, map[string]string{"BC_CONFIG": filepath.Join(dir, "none.yaml")}, settings{}},
	}
	for _, c := range cases {
		p := &bcProvider{lookup: func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }}
		got, err := p.resolve(c.block)
		if err != nil || got != c.want {
			t.Errorf("%s: resolve = %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

// TestFirstPools checks which pools an imported cluster's node_pool
// blocks hold: those made with it, written as a configuration would write
// them (what the API answers for an argument not given is null).
func TestFirstPools(t *testing.T) {
	created := time.Date(2026, 12, 6, 4, 50, 30, 83920000, time.UTC)
	cl := &client.Cluster{ID: clusterID, CreatedAt: created}
	pools := []client.NodePool{
		{ID: "knp_a", Name: "default", MachineType: "e2-standard-4", NodeCount: 1, Zones: []string{}, Labels: map[string]string{},
			Taints: []client.Taint{{Key: "k", Effect: "NoSchedule"}}, CreatedAt: created},
		{ID: "knp_b", Name: "web", MachineType: "e2-standard-4", NodeCount: 2, CreatedAt: created.Add(time.Second)},
	}
	first := firstPools(cl, pools)
	if len(first) != 1 || first[0].Name != "default" {
		t.Fatalf("firstPools = %+v, want the default pool alone", first)
	}
	var got []specModel
	if diags := blockPools(first).ElementsAs(context.Background(), &got, false); diags.HasError() {
		t.Fatal(diags)
	}
	s := got[0]
	if !s.Spot.IsNull() || !s.Zones.IsNull() || !s.Labels.IsNull() || !s.DiskGiB.IsNull() || s.NodeCount.ValueInt64() != 1 {
		t.Errorf("block = %+v, want spot, zones, labels and disk_gib null, node_count 1", s)
	}
	var taints []taintModel
	s.Taints.ElementsAs(context.Background(), &taints, false)
	if len(taints) != 1 || !taints[0].Value.IsNull() || taints[0].Effect.ValueString() != "NoSchedule" {
		t.Errorf("taints = %+v, want one with a null value", taints)
	}
}

// TestCreateOnce checks the keys of a create: the request's own; after a
// deleted resource, one carrying its ID, the same on a retry; an error
// stops at once; an endless run of deleted ones ends.
func TestCreateOnce(t *testing.T) {
	canonical := []byte(`{"name":"web"}`)
	base := idempotencyKey("nodepool", canonical)
	cases := []struct {
		name     string
		answers  []answer[string] // in order; the last repeats
		fail     bool
		wantKeys []string
		wantErr  bool
	}{
		{name: "new", answers: []answer[string]{{ptr("made"), "knp_1", "pending"}}, wantKeys: []string{base}},
		{name: "a retry gets the one made", answers: []answer[string]{{ptr("made"), "knp_1", "ready"}}, wantKeys: []string{base}},
		{name: "after a deleted one", answers: []answer[string]{{ptr("old"), "knp_1", "deleted"}, {ptr("new"), "knp_2", "pending"}},
			wantKeys: []string{base, idempotencyKey("nodepool", canonical, "knp_1")}},
		{name: "after a deleting one and a deleted one", answers: []answer[string]{{ptr("a"), "knp_1", "deleting"}, {ptr("b"), "knp_2", "deleted"}, {ptr("c"), "knp_3", "pending"}},
			wantKeys: []string{base, idempotencyKey("nodepool", canonical, "knp_1"), idempotencyKey("nodepool", canonical, "knp_1", "knp_2")}},
		{name: "refused", fail: true, wantKeys: []string{base}, wantErr: true},
		{name: "deleted ones without end", answers: []answer[string]{{ptr("x"), "knp_x", "deleted"}}, wantErr: true},
	}
	for _, c := range cases {
		var keys []string
		got, err := createOnce("nodepool", canonical, func(key string) (answer[string], error) {
			keys = append(keys, key)
			if c.fail {
				return answer[string]{}, errors.New("CONFLICT")
			}
			return c.answers[min(len(keys), len(c.answers))-1], nil
		})
		if (err != nil) != c.wantErr {
			t.Errorf("%s: err = %v, want error %v", c.name, err, c.wantErr)
			continue
		}
		if c.wantKeys != nil && !slices.Equal(keys, c.wantKeys) {
			t.Errorf("%s: keys %q, want %q", c.name, keys, c.wantKeys)
		}
		if !c.wantErr && (got == nil || *got != *c.answers[len(c.answers)-1].res) {
			t.Errorf("%s: got %v, want the last answer", c.name, got)
		}
		if c.name == "deleted ones without end" && len(keys) != maxKeyChain+1 {
			t.Errorf("%s: %d calls, want %d", c.name, len(keys), maxKeyChain+1)
		}
	}
}

func ptr[T any](v T) *T { return &v }
