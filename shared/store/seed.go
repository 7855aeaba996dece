package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/lifecycle"
)

// Seed is the devstack's seed file (API.md §8): provider accounts, provider
// pools, role bindings and tenants' quotas.
type Seed struct {
	Accounts     []Account      `json:"accounts"`
	Pools        []Pool         `json:"pools"`
	RoleBindings []auth.Binding `json:"roleBindings"`
	Tenants      []Tenant       `json:"tenants,omitempty"`
}

// Tenant is a tenant's entry of the seed: its quota (API.md §10). A
// tenant that no entry names has no quota.
type Tenant struct {
	ID    string          `json:"id"`
	Quota lifecycle.Quota `json:"quota"`
}

// serviceAccountRE matches a service account's email: a user-managed one
// (name@project.iam.gserviceaccount.com) or a Google-managed one.
var serviceAccountRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}@[a-z0-9.:-]+\.gserviceaccount\.com$`)

// ParseSeed decodes a seed file strictly: an unknown field is an error, so
// a typo never silently drops a binding.
func ParseSeed(b []byte) (*Seed, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Seed
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("parse seed: %w", err)
	}
	accounts := map[string]Account{}
	for i, a := range s.Accounts {
		if a.ID == "" || a.Provider == "" {
			return nil, fmt.Errorf("parse seed: accounts[%d] needs an id and a provider", i)
		}
		for field, email := range map[string]string{"impersonate": a.Impersonate, "nodeServiceAccount": a.NodeServiceAccount} {
			if email == "" {
				continue
			}
			if !a.ManagedKubernetes() {
				return nil, fmt.Errorf("parse seed: accounts[%d].%s: provider %q has no service accounts", i, field, a.Provider)
			}
			if !serviceAccountRE.MatchString(email) {
				return nil, fmt.Errorf("parse seed: accounts[%d].%s: %q is not a service account email", i, field, email)
			}
		}
		accounts[a.ID] = a
	}
	for i, p := range s.Pools {
		a, ok := accounts[p.AccountID]
		if p.ID == "" || p.TenantID == "" || !ok {
			return nil, fmt.Errorf("parse seed: pools[%d] needs an id, a tenantId and an accountId among the accounts", i)
		}
		if !a.UsableBy(p.TenantID) {
			return nil, fmt.Errorf("parse seed: pools[%d]: %s", i, lifecycle.Unusable(a.ID, p.TenantID))
		}
	}
	if _, err := auth.MembersFromBindings(s.RoleBindings); err != nil {
		return nil, fmt.Errorf("parse seed: roleBindings: %w", err)
	}
	tenants := map[string]bool{}
	for i, t := range s.Tenants {
		switch {
		case t.ID == "":
			return nil, fmt.Errorf("parse seed: tenants[%d] needs an id", i)
		case tenants[t.ID]:
			return nil, fmt.Errorf("parse seed: tenants[%d]: tenant %s is named twice", i, t.ID)
		case t.Quota.Clusters != nil && *t.Quota.Clusters < 0:
			return nil, fmt.Errorf("parse seed: tenants[%d].quota.clusters: %d is negative", i, *t.Quota.Clusters)
		}
		tenants[t.ID] = true
	}
	return &s, nil
}

// LoadSeed writes the seed's accounts, pools and member documents,
// replacing what was there under the same IDs, in one batch, then each
// tenant's quota (setTenant).
func (s *Store) LoadSeed(ctx context.Context, seed *Seed) error {
	members, err := auth.MembersFromBindings(seed.RoleBindings)
	if err != nil {
		return fmt.Errorf("load seed: %w", err)
	}
	b := s.fs.Batch()
	for _, a := range seed.Accounts {
		b.Set(s.accountRef(a.ID), a)
	}
	for _, p := range seed.Pools {
		b.Set(s.poolRef(p.ID), p)
	}
	for k, m := range members {
		b.Set(s.memberRef(k.TenantID, k.Principal), m)
	}
	if len(seed.Accounts)+len(seed.Pools)+len(members) > 0 {
		if _, err := b.Commit(ctx); err != nil {
			return fmt.Errorf("load seed: %w", err)
		}
	}
	for _, t := range seed.Tenants {
		if err := s.setTenant(ctx, t); err != nil {
			return fmt.Errorf("load seed: tenant %s: %w", t.ID, err)
		}
	}
	return nil
}

// setTenant replaces the tenant's quota and reckons its count of clusters
// that are not deleted from the clusters themselves, in one transaction:
// clusters made before the tenant's document counted them (or before a
// quota was set) count from then on, and the creates and runs that change
// the count meanwhile conflict with it.
func (s *Store) setTenant(ctx context.Context, t Tenant) error {
	ref := s.tenantRef(t.ID)
	return s.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snaps, err := tx.GetAll([]*firestore.DocumentRef{ref})
		if err != nil {
			return err
		}
		var doc lifecycle.Tenant
		if snaps[0].Exists() {
			if err := snaps[0].DataTo(&doc); err != nil {
				return fmt.Errorf("decode tenant: %w", err)
			}
		}
		active, err := tx.Documents(s.clusters(t.ID).Where("active", "==", true).Select()).GetAll()
		if err != nil {
			return fmt.Errorf("read clusters: %w", err)
		}
		doc.Quota = t.Quota
		doc.ClustersCreated = doc.ClustersDeleted + len(active)
		return tx.Set(ref, doc)
	})
}
