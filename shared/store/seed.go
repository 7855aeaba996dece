package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/model"
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
type Tenant = model.SeedTenant

// ParseSeed decodes a seed file strictly: an unknown field is an error, so
// a typo never silently drops a binding. Its accounts, pools and tenants
// are checked by rules (lifecycle.Rules{} is the product's), its role
// bindings by auth's.
func ParseSeed(b []byte, rules Rules) (*Seed, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Seed
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("parse seed: %w", err)
	}
	if err := rules.CheckSeedPools(s.Accounts, s.Pools); err != nil {
		return nil, fmt.Errorf("parse seed: %w", err)
	}
	if _, err := auth.MembersFromBindings(s.RoleBindings); err != nil {
		return nil, fmt.Errorf("parse seed: roleBindings: %w", err)
	}
	if err := rules.CheckSeedTenants(s.Tenants); err != nil {
		return nil, fmt.Errorf("parse seed: %w", err)
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
		var doc model.Tenant
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
