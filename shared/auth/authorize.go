package auth

import (
	"fmt"
	"strings"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/resource"
)

// Every read and mutation of the store, and every call of an internal
// function, is decided by Authorize, over a principal, what it holds (its
// Grant: read from the store in the same transaction as the resource, or
// the function's configured caller), a permission and the resource.
// There is no other way through: a principal is made only by User,
// Substrate or Service, and each kind is held to its own rules.

// PrincipalKind tells what acts.
type PrincipalKind int

// The principals: a tenant's users and the substrate reconciler, in the
// store's calls; the Google services that invoke the internal functions
// (Cloud Tasks, Cloud Scheduler, the Pub/Sub push), at those functions'
// edge (ServiceAccount).
const (
	// KindUser is a tenant's member, the `sub` of a token the API
	// verified, allowed what its role bindings grant.
	KindUser PrincipalKind = iota + 1
	// KindSubstrate is the substrate reconciler acting for one
	// substrate of one tenant: allowed exactly what that substrate
	// needs, its own clusters and node pools.
	KindSubstrate
	// KindService is a Google service invoking an internal function, as
	// the verified email of its OIDC token names its service account:
	// allowed to invoke the one function that names it its caller.
	KindService
)

// Principal is who makes a call, in the tenant it names. Its fields are
// unexported: what a principal is comes from its constructor, never from
// a field set by hand.
type Principal struct {
	kind     PrincipalKind
	tenantID string
	id       string
	pool     string
}

// User is the tenant's member subject, as authenticated by the API.
func User(tenantID, subject string) Principal {
	return Principal{kind: KindUser, tenantID: tenantID, id: subject}
}

// Substrate is the substrate reconciler acting for substrate (ksb_...)
// of pool in the tenant. Its grant is the substrate's own document, read
// by the store: a substrate that is not active in that tenant, or of
// another pool, is allowed nothing.
func Substrate(tenantID, substrate, pool string) Principal {
	return Principal{kind: KindSubstrate, tenantID: tenantID, id: substrate, pool: pool}
}

// Service is the service account email, verified by its OIDC token, of
// a Google service calling an internal function.
func Service(email string) Principal {
	return Principal{kind: KindService, id: strings.ToLower(email)}
}

// Kind is what acts.
func (p Principal) Kind() PrincipalKind { return p.kind }

// TenantID is the tenant the call names.
func (p Principal) TenantID() string { return p.tenantID }

// ID is the member's subject, or the substrate's ID.
func (p Principal) ID() string { return p.id }

// SubstrateID is the acting substrate's ID; "" for a user.
func (p Principal) SubstrateID() string {
	if p.kind == KindSubstrate {
		return p.id
	}
	return ""
}

// Pool is the acting substrate's pool; "" for a user.
func (p Principal) Pool() string {
	if p.kind == KindSubstrate {
		return p.pool
	}
	return ""
}

// Actor is the name that scopes the principal's idempotency keys.
func (p Principal) Actor() string {
	if p.kind == KindSubstrate {
		return "substrate:" + p.id
	}
	return p.id
}

// String names the principal in logs.
func (p Principal) String() string {
	switch p.kind {
	case KindUser:
		return fmt.Sprintf("user %s of tenant %s", p.id, p.tenantID)
	case KindSubstrate:
		return fmt.Sprintf("substrate %s of pool %s in tenant %s", p.id, p.pool, p.tenantID)
	case KindService:
		return "service account " + p.id
	}
	return "nobody"
}

// SubstrateGrant is what a substrate's document grants its reconciler:
// the substrate as stored, in the principal's tenant.
type SubstrateGrant struct {
	Active bool
	PoolID string
	// Mode is the substrate's cluster choice (resource.SubstrateCreate
	// or SubstrateAdopt); AdoptClusterID the cluster it adopts.
	Mode           string
	AdoptClusterID string
}

// Grant is what the store read of the principal: the member document of
// a user (nil when there is none), the document of a substrate (nil when
// there is none).
type Grant struct {
	Member    *Member
	Substrate *SubstrateGrant
	// Invoker is the one service account configured as the caller of
	// an internal function (a KindService principal's grant).
	Invoker string
}

// Resource is what a decision is about: the tenant (ClusterID empty), a
// cluster, or a node pool of a cluster, with what the substrates' rules
// read of it.
type Resource struct {
	ClusterID string
	// Pool is the provider pool of a cluster to create.
	Pool string
	// ManagedBy is the substrate that manages the cluster ("" none);
	// AdoptedBy the substrates that adopted it (ID → pool).
	ManagedBy string
	AdoptedBy map[string]string
	// NodePool is set when the resource is one of the cluster's node
	// pools: NodePoolManagedBy the substrate that manages it.
	NodePool          bool
	NodePoolManagedBy string
}

// Tenant is the tenant as a resource (the permission to create a cluster
// on Pool, or to read what is not yet in a cluster).
func Tenant(pool string) Resource { return Resource{Pool: pool} }

// PermInvoke is a Google service's permission to call an internal
// function. No role grants it.
const PermInvoke Permission = "run.routes.invoke"

// PermAdopt is a substrate's permission to record that it uses a tenant's
// cluster (adopt mode). No role grants it.
const PermAdopt Permission = "compute:kubernetes:adopt"

// Admit is the first step of every decision, taken before any resource
// is looked up: a principal that holds nothing in the tenant (a user with
// no binding, a substrate that is not an active one of its pool there)
// is PERMISSION_DENIED, revealing nothing about the tenant.
func Admit(p Principal, g Grant) error {
	switch p.kind {
	case KindUser:
		return RequireMember(g.Member)
	case KindSubstrate:
		s := g.Substrate
		if s == nil || !s.Active || s.PoolID != p.pool || p.pool == "" {
			return errDenied()
		}
		return nil
	case KindService:
		if p.id == "" || g.Invoker == "" {
			return errDenied()
		}
		return nil
	}
	return errDenied()
}

// Authorize decides whether p, holding g, has perm on r: nil, or a
// PERMISSION_DENIED error. A user has what its role bindings grant (API.md
// §3). A substrate may create a cluster on its own pool (create mode),
// adopt the cluster its policy names (adopt mode), read and add node
// pools to the cluster it made or adopted, change and delete only the
// node pools it made, and delete only the cluster it made.
func Authorize(p Principal, g Grant, perm Permission, r Resource) error {
	if err := Admit(p, g); err != nil {
		return err
	}
	switch p.kind {
	case KindUser:
		if perm == PermAdopt || perm == PermInvoke {
			return errs.E(errs.PermissionDenied, "permission %s is not a user's", perm)
		}
		return g.Member.Require(perm, r.ClusterID)
	case KindService:
		if perm == PermInvoke && strings.EqualFold(p.id, g.Invoker) {
			return nil
		}
		return errs.E(errs.PermissionDenied, "the caller may not call this function")
	case KindSubstrate:
		if perm != PermInvoke && substrateMay(p, g.Substrate, perm, r) {
			return nil
		}
		what := "the tenant"
		if r.ClusterID != "" {
			what = "cluster " + r.ClusterID
		}
		return errs.E(errs.PermissionDenied, "substrate %s may not use %s on %s", p.id, perm, what)
	}
	return errDenied()
}

func substrateMay(p Principal, s *SubstrateGrant, perm Permission, r Resource) bool {
	own := r.ClusterID != "" && r.ManagedBy == p.id
	adopted := r.ClusterID != "" && r.ManagedBy == "" && r.AdoptedBy[p.id] == p.pool
	switch perm {
	case PermCreate:
		return r.ClusterID == "" && r.Pool == p.pool && s.Mode == resource.SubstrateCreate
	case PermAdopt:
		return r.ClusterID != "" && s.Mode == resource.SubstrateAdopt && r.ClusterID == s.AdoptClusterID
	case PermRead:
		return own || adopted
	case PermUpdate:
		if r.NodePool && r.NodePoolManagedBy != p.id {
			// Adding a pool (NodePool false) to the cluster is allowed;
			// changing one is only for the pools it made.
			return false
		}
		return own || adopted
	case PermDelete:
		return own && !r.NodePool
	}
	return false
}
