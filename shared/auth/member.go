package auth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/resource"
)

// Permission is an action on a resource, as in API.md §3.
type Permission string

// The permissions of API.md §3. Create is granted on the tenant, the others
// on a cluster.
const (
	PermRead   Permission = "compute:kubernetes:read"
	PermUpdate Permission = "compute:kubernetes:update"
	PermCreate Permission = "compute:kubernetes:create"
	PermDelete Permission = "compute:kubernetes:delete"
)

// Role is a named set of permissions.
type Role string

// The roles of API.md §3, each including the one before.
const (
	RoleViewer Role = "kubernetes.viewer"
	RoleEditor Role = "kubernetes.editor"
	RoleAdmin  Role = "kubernetes.admin"
)

var rolePermissions = map[Role][]Permission{
	RoleViewer: {PermRead},
	RoleEditor: {PermRead, PermUpdate},
	RoleAdmin:  {PermRead, PermUpdate, PermCreate, PermDelete},
}

// Valid reports whether r is one of the known roles.
func (r Role) Valid() bool {
	_, ok := rolePermissions[r]
	return ok
}

// Grants reports whether the role includes perm. Unknown roles grant
// nothing.
func (r Role) Grants(perm Permission) bool {
	return slices.Contains(rolePermissions[r], perm)
}

// Member is the stored document tenants/{tenantId}/members/{principal}: all
// role bindings of one principal in one tenant. A binding is tenant-wide
// (Roles) or for one cluster (ClusterRoles, keyed by cluster ID).
//
// Roles are kept sorted and without duplicates by Add, so that folding the
// same bindings twice gives an equal document.
type Member struct {
	Roles        []Role            `firestore:"roles" json:"roles"`
	ClusterRoles map[string][]Role `firestore:"clusterRoles" json:"clusterRoles"`
}

// Add binds role to the member, for the whole tenant if resource is empty,
// else for the cluster whose ID resource is. Adding a binding the member
// already has changes nothing. It returns an errs.Invalid error for an
// unknown role or a resource that is not a cluster ID.
func (m *Member) Add(role Role, resource string) error {
	if !role.Valid() {
		return errs.E(errs.Invalid, "unknown role %q", role)
	}
	if resource == "" {
		m.Roles = addRole(m.Roles, role)
		return nil
	}
	if !isClusterID(resource) {
		return errs.E(errs.Invalid, "resource %q is not a cluster ID", resource)
	}
	if m.ClusterRoles == nil {
		m.ClusterRoles = map[string][]Role{}
	}
	m.ClusterRoles[resource] = addRole(m.ClusterRoles[resource], role)
	return nil
}

func addRole(roles []Role, r Role) []Role {
	i, found := slices.BinarySearch(roles, r)
	if found {
		return roles
	}
	return slices.Insert(roles, i, r)
}

// isClusterID reports whether s has the shape of a cluster TypeID as inputs
// accept it (API.md §4): "kcl_" and 26 to 52 lowercase base32 characters.
func isClusterID(s string) bool {
	suffix, ok := strings.CutPrefix(s, resource.ClusterPrefix+"_")
	if !ok || len(suffix) < 26 || len(suffix) > 52 {
		return false
	}
	for i := 0; i < len(suffix); i++ {
		c := suffix[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}

// Validate reports the first unknown role or malformed cluster ID in m, as
// an errs.Invalid error. A stored document is validated when loaded;
// decisions on an invalid one simply ignore what they do not know.
func (m *Member) Validate() error {
	if m == nil {
		return nil
	}
	for _, r := range m.Roles {
		if !r.Valid() {
			return errs.E(errs.Invalid, "unknown role %q", r)
		}
	}
	for id, roles := range m.ClusterRoles {
		if !isClusterID(id) {
			return errs.E(errs.Invalid, "resource %q is not a cluster ID", id)
		}
		for _, r := range roles {
			if !r.Valid() {
				return errs.E(errs.Invalid, "unknown role %q on %s", r, id)
			}
		}
	}
	return nil
}

// HasBindings reports whether the member has any role at all, tenant-wide
// or on a cluster. A nil Member has none.
func (m *Member) HasBindings() bool {
	if m == nil {
		return false
	}
	if len(m.Roles) > 0 {
		return true
	}
	for _, roles := range m.ClusterRoles {
		if len(roles) > 0 {
			return true
		}
	}
	return false
}

// Allows reports whether the member has perm on the cluster clusterID, or
// on the tenant if clusterID is empty. Tenant-wide roles cover the tenant
// and every cluster in it; a cluster role covers only its cluster, so only
// tenant-wide roles count for a tenant-level permission (PermCreate). A nil
// Member is allowed nothing.
func (m *Member) Allows(perm Permission, clusterID string) bool {
	if m == nil {
		return false
	}
	if slices.ContainsFunc(m.Roles, func(r Role) bool { return r.Grants(perm) }) {
		return true
	}
	if clusterID == "" {
		return false
	}
	return slices.ContainsFunc(m.ClusterRoles[clusterID], func(r Role) bool { return r.Grants(perm) })
}

// errDenied is the one answer to a caller who is not a member of the
// tenant: it must not tell an unknown tenant from one the caller is not in.
func errDenied() error { return errs.E(errs.PermissionDenied, "permission denied") }

// RequireMember is the tenant-membership check, made before any resource is
// looked up: a missing member document (nil) or one without any binding is
// an errs.PermissionDenied error that reveals nothing about the tenant.
func RequireMember(m *Member) error {
	if !m.HasBindings() {
		return errDenied()
	}
	return nil
}

// Require is the permission check, made after the resource was found: nil
// if the member has perm on the cluster (or on the tenant if clusterID is
// empty), else an errs.PermissionDenied error naming the permission.
func (m *Member) Require(perm Permission, clusterID string) error {
	if !m.HasBindings() {
		return errDenied()
	}
	if m.Allows(perm, clusterID) {
		return nil
	}
	if clusterID == "" {
		return errs.E(errs.PermissionDenied, "permission %s on the tenant is required", perm)
	}
	return errs.E(errs.PermissionDenied, "permission %s on cluster %s is required", perm, clusterID)
}

// Binding is one role binding as the devstack seed file writes it
// (API.md §8): a role for a principal in a tenant, on one cluster if
// Resource is set.
type Binding struct {
	TenantID  string `json:"tenantId"`
	Principal string `json:"principal"`
	Role      Role   `json:"role"`
	Resource  string `json:"resource,omitempty"`
}

// MemberKey names a member document: tenants/{TenantID}/members/{Principal}.
type MemberKey struct {
	TenantID  string
	Principal string
}

// MembersFromBindings folds bindings into one Member per (tenant,
// principal), for a loader to write as member documents. It checks every
// binding and returns an errs.Invalid error naming each bad one by its
// index (field paths like "[2].role").
func MembersFromBindings(bindings []Binding) (map[MemberKey]*Member, error) {
	members := map[MemberKey]*Member{}
	var bad []errs.FieldError
	for i, b := range bindings {
		// Any tenant ID and principal can be bound: the store encodes
		// what Firestore could not take as a document ID.
		if b.TenantID == "" {
			bad = append(bad, errs.FieldError{Field: fmt.Sprintf("[%d].tenantId", i), Reason: "required"})
		}
		if b.Principal == "" {
			bad = append(bad, errs.FieldError{Field: fmt.Sprintf("[%d].principal", i), Reason: "required"})
		}
		if !b.Role.Valid() {
			bad = append(bad, errs.FieldError{Field: fmt.Sprintf("[%d].role", i), Reason: fmt.Sprintf("unknown role %q", b.Role)})
		}
		if b.Resource != "" && !isClusterID(b.Resource) {
			bad = append(bad, errs.FieldError{Field: fmt.Sprintf("[%d].resource", i), Reason: "not a cluster ID"})
		}
		if len(bad) > 0 {
			continue
		}
		k := MemberKey{TenantID: b.TenantID, Principal: b.Principal}
		m := members[k]
		if m == nil {
			m = &Member{}
			members[k] = m
		}
		if err := m.Add(b.Role, b.Resource); err != nil {
			// Unreachable: the binding was checked above.
			return nil, fmt.Errorf("binding %d: %w", i, err)
		}
	}
	if len(bad) > 0 {
		return nil, errs.InvalidFields(bad)
	}
	return members, nil
}
