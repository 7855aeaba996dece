package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/better-compute/kubernetes/shared/auth"
)

// Seed is the devstack's seed file (API.md §8): provider accounts, provider
// pools and role bindings.
type Seed struct {
	Accounts     []Account      `json:"accounts"`
	Pools        []Pool         `json:"pools"`
	RoleBindings []auth.Binding `json:"roleBindings"`
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
			return nil, fmt.Errorf("parse seed: pools[%d]: %s", i, Unusable(a.ID, p.TenantID))
		}
	}
	if _, err := auth.MembersFromBindings(s.RoleBindings); err != nil {
		return nil, fmt.Errorf("parse seed: roleBindings: %w", err)
	}
	return &s, nil
}

// LoadSeed writes the seed's accounts, pools and member documents,
// replacing what was there under the same IDs, in one batch.
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
	if _, err := b.Commit(ctx); err != nil {
		return fmt.Errorf("load seed: %w", err)
	}
	return nil
}
