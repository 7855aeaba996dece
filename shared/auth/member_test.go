package auth

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/better-compute/kubernetes/shared/errs"
)

const (
	kclA = "kcl_01jd0000000000000000000000"
	kclB = "kcl_01jd0000000000000000000001"
)

func TestRolePermissionMatrix(t *testing.T) {
	perms := []Permission{PermRead, PermUpdate, PermCreate, PermDelete}
	want := map[Role][]bool{
		RoleViewer:         {true, false, false, false},
		RoleEditor:         {true, true, false, false},
		RoleAdmin:          {true, true, true, true},
		"kubernetes.x":     {false, false, false, false},
		"":                 {false, false, false, false},
		"KUBERNETES.ADMIN": {false, false, false, false},
	}
	for role, grants := range want {
		for i, p := range perms {
			if got := role.Grants(p); got != grants[i] {
				t.Errorf("Role(%q).Grants(%s) = %v, want %v", role, p, got, grants[i])
			}
		}
	}
}

func TestAllows(t *testing.T) {
	tenantAdmin := &Member{Roles: []Role{RoleAdmin}}
	tenantViewer := &Member{Roles: []Role{RoleViewer}}
	clusterAdmin := &Member{ClusterRoles: map[string][]Role{kclA: {RoleAdmin}}}
	clusterEditor := &Member{ClusterRoles: map[string][]Role{kclA: {RoleEditor}}}
	mixed := &Member{Roles: []Role{RoleViewer}, ClusterRoles: map[string][]Role{kclA: {RoleEditor}}}
	unknown := &Member{Roles: []Role{"kubernetes.owner"}}

	tests := []struct {
		name    string
		m       *Member
		perm    Permission
		cluster string
		want    bool
	}{
		{"nil member reads", nil, PermRead, kclA, false},
		{"empty member reads", &Member{}, PermRead, kclA, false},
		{"tenant admin creates", tenantAdmin, PermCreate, "", true},
		{"tenant admin deletes any cluster", tenantAdmin, PermDelete, kclB, true},
		{"tenant viewer reads any cluster", tenantViewer, PermRead, kclB, true},
		{"tenant viewer updates", tenantViewer, PermUpdate, kclA, false},
		{"tenant viewer creates", tenantViewer, PermCreate, "", false},
		{"cluster admin deletes its cluster", clusterAdmin, PermDelete, kclA, true},
		{"cluster admin deletes another cluster", clusterAdmin, PermDelete, kclB, false},
		{"cluster admin reads another cluster", clusterAdmin, PermRead, kclB, false},
		{"cluster admin creates in the tenant", clusterAdmin, PermCreate, "", false},
		{"cluster admin create named with its cluster", clusterAdmin, PermCreate, kclA, true},
		{"cluster editor updates its cluster", clusterEditor, PermUpdate, kclA, true},
		{"cluster editor deletes its cluster", clusterEditor, PermDelete, kclA, false},
		{"mixed updates the bound cluster", mixed, PermUpdate, kclA, true},
		{"mixed updates another cluster", mixed, PermUpdate, kclB, false},
		{"mixed reads another cluster", mixed, PermRead, kclB, true},
		{"unknown role grants nothing", unknown, PermRead, kclA, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.Allows(tt.perm, tt.cluster); got != tt.want {
				t.Errorf("Allows(%s, %q) = %v, want %v", tt.perm, tt.cluster, got, tt.want)
			}
			if tt.perm == PermRead {
				if got := tt.m.Allows(PermRead, tt.cluster); got != tt.want {
					t.Errorf("Allows(read, %q) = %v, want %v", tt.cluster, got, tt.want)
				}
			}
		})
	}
}

func TestCheckOrder(t *testing.T) {
	viewer := &Member{ClusterRoles: map[string][]Role{kclA: {RoleViewer}}}
	tests := []struct {
		name       string
		m          *Member
		wantMember errs.Kind // -1: nil error
		perm       Permission
		cluster    string
		wantPerm   errs.Kind
	}{
		{"no member document", nil, errs.PermissionDenied, PermRead, kclA, errs.PermissionDenied},
		{"member document without bindings", &Member{ClusterRoles: map[string][]Role{kclA: {}}}, errs.PermissionDenied, PermRead, kclA, errs.PermissionDenied},
		{"viewer reads its cluster", viewer, -1, PermRead, kclA, -1},
		{"viewer updates its cluster", viewer, -1, PermUpdate, kclA, errs.PermissionDenied},
		{"viewer reads another cluster", viewer, -1, PermRead, kclB, errs.PermissionDenied},
		{"viewer creates", viewer, -1, PermCreate, "", errs.PermissionDenied},
	}
	kind := func(err error) errs.Kind {
		if err == nil {
			return -1
		}
		return errs.KindOf(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kind(RequireMember(tt.m)); got != tt.wantMember {
				t.Errorf("RequireMember() kind = %v, want %v", got, tt.wantMember)
			}
			if got := kind(tt.m.Require(tt.perm, tt.cluster)); got != tt.wantPerm {
				t.Errorf("Require(%s, %q) kind = %v, want %v", tt.perm, tt.cluster, got, tt.wantPerm)
			}
		})
	}
	// A non-member learns nothing: the same answer for every tenant.
	if a, b := RequireMember(nil).Error(), RequireMember(&Member{}).Error(); a != b {
		t.Errorf("RequireMember(nil) = %q, RequireMember(empty) = %q, want the same", a, b)
	}
}

func TestMembersFromBindings(t *testing.T) {
	var bindings []Binding
	seed := `[
		{"tenantId": "acme", "principal": "alice", "role": "kubernetes.admin"},
		{"tenantId": "acme", "principal": "bob", "role": "kubernetes.viewer"},
		{"tenantId": "acme", "principal": "bob", "role": "kubernetes.editor", "resource": "` + kclA + `"},
		{"tenantId": "acme", "principal": "bob", "role": "kubernetes.editor", "resource": "` + kclA + `"},
		{"tenantId": "acme", "principal": "bob", "role": "kubernetes.admin", "resource": "` + kclA + `"},
		{"tenantId": "globex", "principal": "alice", "role": "kubernetes.viewer"}
	]`
	if err := json.Unmarshal([]byte(seed), &bindings); err != nil {
		t.Fatal(err)
	}
	got, err := MembersFromBindings(bindings)
	if err != nil {
		t.Fatalf("MembersFromBindings() = %v", err)
	}
	want := map[MemberKey]*Member{
		{"acme", "alice"}:   {Roles: []Role{RoleAdmin}},
		{"acme", "bob"}:     {Roles: []Role{RoleViewer}, ClusterRoles: map[string][]Role{kclA: {RoleAdmin, RoleEditor}}},
		{"globex", "alice"}: {Roles: []Role{RoleViewer}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MembersFromBindings() = %v, want %v", got, want)
	}
	for k, m := range got {
		if err := m.Validate(); err != nil {
			t.Errorf("member %v Validate() = %v", k, err)
		}
	}
}

func TestMembersFromBindingsErrors(t *testing.T) {
	bindings := []Binding{
		{TenantID: "acme", Principal: "alice", Role: RoleAdmin},
		{TenantID: "acme", Principal: "bob", Role: "kubernetes.owner"},
		{TenantID: "", Principal: "carol", Role: RoleViewer},
		{TenantID: "acme", Principal: "", Role: RoleViewer},
		{TenantID: "acme", Principal: "dave", Role: RoleViewer, Resource: "knp_01jd0000000000000000000000"},
	}
	_, err := MembersFromBindings(bindings)
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Invalid {
		t.Fatalf("MembersFromBindings() = %v, want an INVALID_INPUT error", err)
	}
	var fields []string
	for _, f := range e.Fields {
		fields = append(fields, f.Field)
	}
	want := []string{"[1].role", "[2].tenantId", "[3].principal", "[4].resource"}
	if !reflect.DeepEqual(fields, want) {
		t.Errorf("fields = %v, want %v", fields, want)
	}
}

func TestMemberAdd(t *testing.T) {
	tests := []struct {
		role     Role
		resource string
		wantErr  bool
	}{
		{RoleViewer, "", false},
		{RoleAdmin, kclA, false},
		{"viewer", "", true},
		{RoleViewer, "kcl_short", true},
		{RoleViewer, "kcl_01JD0000000000000000000000", true},
		{RoleViewer, "knp_01jd0000000000000000000000", true},
	}
	for _, tt := range tests {
		t.Run(string(tt.role)+"@"+tt.resource, func(t *testing.T) {
			var m Member
			err := m.Add(tt.role, tt.resource)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Add(%q, %q) = %v, want error %v", tt.role, tt.resource, err, tt.wantErr)
			}
			if err != nil && !errs.Is(err, errs.Invalid) {
				t.Errorf("Add(%q, %q) kind = %v, want INVALID_INPUT", tt.role, tt.resource, errs.KindOf(err))
			}
			if err == nil && !m.HasBindings() {
				t.Errorf("after Add(%q, %q) HasBindings() = false", tt.role, tt.resource)
			}
		})
	}
}

func TestMemberValidate(t *testing.T) {
	tests := []struct {
		name    string
		m       *Member
		wantErr bool
	}{
		{"nil", nil, false},
		{"ok", &Member{Roles: []Role{RoleAdmin}, ClusterRoles: map[string][]Role{kclA: {RoleViewer}}}, false},
		{"unknown tenant role", &Member{Roles: []Role{"x"}}, true},
		{"unknown cluster role", &Member{ClusterRoles: map[string][]Role{kclA: {"x"}}}, true},
		{"bad cluster ID", &Member{ClusterRoles: map[string][]Role{"acme": {RoleViewer}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.m.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate() = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestMemberJSON(t *testing.T) {
	m := &Member{Roles: []Role{RoleViewer}, ClusterRoles: map[string][]Role{kclA: {RoleAdmin}}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"roles":["kubernetes.viewer"],"clusterRoles":{"` + kclA + `":["kubernetes.admin"]}}`
	if string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
}

// Any tenant ID and principal can be bound, those Firestore cannot take
// as document IDs included: the store encodes them.
func TestMembersFromBindingsAnyID(t *testing.T) {
	var bindings []Binding
	ids := []string{".", "..", "__x__", "a/b", "alice/../bob", "~"}
	for _, id := range ids {
		bindings = append(bindings, Binding{TenantID: id, Principal: id, Role: RoleViewer})
	}
	got, err := MembersFromBindings(bindings)
	if err != nil || len(got) != len(ids) {
		t.Fatalf("MembersFromBindings() = %v, %v; want %d members", got, err, len(ids))
	}
	for _, id := range ids {
		if m := got[MemberKey{TenantID: id, Principal: id}]; m == nil || !m.Allows(PermRead, "") {
			t.Errorf("member %q = %v, want a viewer", id, m)
		}
	}
}
