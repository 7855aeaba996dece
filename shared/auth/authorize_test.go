package auth

import (
	"fmt"
	"testing"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/resource"
)

// TestAuthorize holds every principal against every permission on every
// kind of resource: the whole trust model of the store's calls in one
// table.
func TestAuthorize(t *testing.T) {
	const (
		own     = "kcl_0000000000000000000000000a" // made by ksb_a
		adopted = "kcl_0000000000000000000000000b" // adopted by ksb_b
		tenants = "kcl_0000000000000000000000000c" // the tenant's, unused
		other   = "kcl_0000000000000000000000000d" // adopted by ksb_x of another pool
	)
	member := func(roles ...Role) *Member { return &Member{Roles: roles} }
	onOne := &Member{ClusterRoles: map[string][]Role{tenants: {RoleEditor}}}
	createGrant := &SubstrateGrant{Active: true, PoolID: "pool-a", Mode: resource.SubstrateCreate}
	adoptGrant := &SubstrateGrant{Active: true, PoolID: "pool-b", Mode: resource.SubstrateAdopt, AdoptClusterID: adopted}

	principals := []struct {
		name  string
		p     Principal
		g     Grant
		allow map[string]bool // of the cases below; absent: denied
	}{
		{"viewer", User("acme", "bob"), Grant{Member: member(RoleViewer)},
			set("read tenant", "read own", "read adopted", "read tenants", "read other")},
		{"editor", User("acme", "eve"), Grant{Member: member(RoleEditor)},
			set("read tenant", "read own", "read adopted", "read tenants", "read other",
				"add pool to own", "add pool to adopted", "add pool to tenants", "add pool to other",
				"change own pool", "change tenant's pool", "change pool in adopted")},
		{"admin", User("acme", "alice"), Grant{Member: member(RoleAdmin)},
			set("read tenant", "read own", "read adopted", "read tenants", "read other",
				"add pool to own", "add pool to adopted", "add pool to tenants", "add pool to other",
				"change own pool", "change tenant's pool", "change pool in adopted",
				"create on pool-a", "create on pool-b", "delete own", "delete adopted", "delete tenants")},
		{"editor of one cluster", User("acme", "carol"), Grant{Member: onOne},
			set("read tenants", "add pool to tenants", "change tenant's pool")},
		{"stranger", User("acme", "mallory"), Grant{}, set()},
		{"member without roles", User("acme", "nobody"), Grant{Member: &Member{}}, set()},
		{"substrate creating its cluster", Substrate("acme", "ksb_a", "pool-a"), Grant{Substrate: createGrant},
			set("create on pool-a", "read own", "add pool to own", "change own pool", "delete own")},
		{"substrate adopting a cluster", Substrate("acme", "ksb_b", "pool-b"), Grant{Substrate: adoptGrant},
			set("adopt adopted", "read adopted", "add pool to adopted", "change pool in adopted")},
		{"substrate not in the tenant", Substrate("acme", "ksb_a", "pool-a"), Grant{}, set()},
		{"substrate of another pool", Substrate("acme", "ksb_a", "pool-z"), Grant{Substrate: createGrant}, set()},
		{"substrate deleted", Substrate("acme", "ksb_a", "pool-a"), Grant{Substrate: &SubstrateGrant{PoolID: "pool-a", Mode: resource.SubstrateCreate}}, set()},
		{"zero principal", Principal{}, Grant{Member: member(RoleAdmin)}, set()},
		{"internal caller", Service("tasks@p.iam.gserviceaccount.com"), Grant{Invoker: "tasks@p.iam.gserviceaccount.com", Member: member(RoleAdmin)}, set()},
	}
	cluster := func(id string) Resource {
		r := Resource{ClusterID: id, Pool: "pool-dev"}
		switch id {
		case own:
			r.ManagedBy, r.Pool = "ksb_a", "pool-a"
		case adopted:
			r.AdoptedBy = map[string]string{"ksb_b": "pool-b"}
		case other:
			r.AdoptedBy = map[string]string{"ksb_x": "pool-x"}
		}
		return r
	}
	pool := func(id, managedBy string) Resource {
		r := cluster(id)
		r.NodePool, r.NodePoolManagedBy = true, managedBy
		return r
	}
	cases := []struct {
		name string
		perm Permission
		r    Resource
	}{
		{"read tenant", PermRead, Resource{}},
		{"read own", PermRead, cluster(own)},
		{"read adopted", PermRead, cluster(adopted)},
		{"read tenants", PermRead, cluster(tenants)},
		{"read other", PermRead, cluster(other)},
		{"create on pool-a", PermCreate, Tenant("pool-a")},
		{"create on pool-b", PermCreate, Tenant("pool-b")},
		{"adopt own", PermAdopt, cluster(own)},
		{"adopt adopted", PermAdopt, cluster(adopted)},
		{"adopt tenants", PermAdopt, cluster(tenants)},
		{"add pool to own", PermUpdate, cluster(own)},
		{"add pool to adopted", PermUpdate, cluster(adopted)},
		{"add pool to tenants", PermUpdate, cluster(tenants)},
		{"add pool to other", PermUpdate, cluster(other)},
		{"change own pool", PermUpdate, pool(own, "ksb_a")},
		{"change tenant's pool", PermUpdate, pool(tenants, "")},
		{"change pool in adopted", PermUpdate, pool(adopted, "ksb_b")},
		{"change tenant's pool in adopted", PermUpdate, pool(adopted, "")},
		{"change another substrate's pool", PermUpdate, pool(other, "ksb_x")},
		{"delete own", PermDelete, cluster(own)},
		{"delete adopted", PermDelete, cluster(adopted)},
		{"delete tenants", PermDelete, cluster(tenants)},
		{"delete a pool", PermDelete, pool(own, "ksb_a")},
	}
	for _, pr := range principals {
		for _, c := range cases {
			want := pr.allow[c.name]
			if pr.p.Kind() == KindUser && c.name == "change tenant's pool in adopted" {
				// A user's role on the cluster decides; the managed
				// rules are the state's (lifecycle.MayChange).
				want = pr.allow["add pool to adopted"]
			}
			if pr.p.Kind() == KindUser && c.name == "change another substrate's pool" {
				want = pr.allow["add pool to other"]
			}
			if c.name == "delete a pool" {
				// Node pools are deleted with PermUpdate; a role's
				// PermDelete is on the whole cluster, a substrate's
				// on its own cluster only.
				want = pr.p.Kind() == KindUser && pr.allow["delete tenants"]
			}
			err := Authorize(pr.p, pr.g, c.perm, c.r)
			if want && err != nil {
				t.Errorf("%s: %s = %v, want allowed", pr.name, c.name, err)
			}
			if !want && !errs.Is(err, errs.PermissionDenied) {
				t.Errorf("%s: %s = %v, want PERMISSION_DENIED", pr.name, c.name, err)
			}
		}
	}
}

// An internal function is invoked by its one configured caller only:
// no user, substrate or other service account.
func TestAuthorizeInvoke(t *testing.T) {
	const tasks = "tasks@p.iam.gserviceaccount.com"
	for _, c := range []struct {
		name string
		p    Principal
		g    Grant
		ok   bool
	}{
		{"its caller", Service(tasks), Grant{Invoker: tasks}, true},
		{"its caller, in capitals", Service("Tasks@P.iam.gserviceaccount.com"), Grant{Invoker: tasks}, true},
		{"another service account", Service("scheduler@p.iam.gserviceaccount.com"), Grant{Invoker: tasks}, false},
		{"no caller configured", Service(tasks), Grant{}, false},
		{"no email", Service(""), Grant{Invoker: tasks}, false},
		{"an admin", User("acme", tasks), Grant{Member: &Member{Roles: []Role{RoleAdmin}}, Invoker: tasks}, false},
		{"a substrate", Substrate("acme", "ksb_1", "p"), Grant{Substrate: &SubstrateGrant{Active: true, PoolID: "p"}, Invoker: tasks}, false},
	} {
		err := Authorize(c.p, c.g, PermInvoke, Resource{})
		if c.ok != (err == nil) || (!c.ok && !errs.Is(err, errs.PermissionDenied)) {
			t.Errorf("%s: Authorize(invoke) = %v, want allowed %v", c.name, err, c.ok)
		}
	}
}

// A principal that is not admitted learns nothing: the same refusal
// whatever the resource.
func TestAdmitRevealsNothing(t *testing.T) {
	var msgs []string
	for _, c := range []struct {
		p Principal
		g Grant
	}{
		{User("acme", "mallory"), Grant{}},
		{Substrate("acme", "ksb_1", "pool"), Grant{}},
		{Substrate("acme", "ksb_1", "pool"), Grant{Substrate: &SubstrateGrant{PoolID: "pool"}}},
	} {
		err := Admit(c.p, c.g)
		if !errs.Is(err, errs.PermissionDenied) {
			t.Fatalf("Admit(%v) = %v, want PERMISSION_DENIED", c.p, err)
		}
		msgs = append(msgs, err.Error())
	}
	for _, m := range msgs[1:] {
		if m != msgs[0] {
			t.Errorf("refusals differ: %q", msgs)
		}
	}
}

// Principals print what they are, for the logs.
func TestPrincipalString(t *testing.T) {
	for p, want := range map[Principal]string{
		User("acme", "alice"):                "user alice of tenant acme",
		Substrate("acme", "ksb_1", "pool-a"): "substrate ksb_1 of pool pool-a in tenant acme",
	} {
		if got := fmt.Sprint(p); got != want {
			t.Errorf("%#v prints %q, want %q", p, got, want)
		}
	}
	if User("acme", "alice").SubstrateID() != "" || Substrate("acme", "ksb_1", "p").SubstrateID() != "ksb_1" {
		t.Error("SubstrateID is a substrate's only")
	}
}

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}
