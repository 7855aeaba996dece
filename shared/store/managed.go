package store

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/lifecycle"
)

// member returns the caller's member document; a substrate has none and
// needs none.
func (c Caller) member(snap *firestore.DocumentSnapshot) (*auth.Member, error) {
	if c.Substrate != "" {
		return nil, nil
	}
	return decodeMember(snap)
}

// require checks the member's permission; a substrate acts for its tenant.
func (c Caller) require(m *auth.Member, perm auth.Permission, clusterID string) error {
	if c.Substrate != "" {
		return nil
	}
	return m.Require(perm, clusterID)
}

// managed marks a pool the caller creates as its substrate's.
func (c Caller) managed(spec lifecycle.NodePoolSpec) lifecycle.NodePoolSpec {
	spec.ManagedBy, spec.ManagedPool = c.Substrate, c.Pool
	return spec
}

// mayChange refuses a change of what a substrate manages (managedBy) by
// anyone but that substrate, and a substrate's change of what it does not
// manage.
func (c Caller) mayChange(managedBy, pool, what, name string) error {
	switch {
	case managedBy == c.Substrate:
		return nil
	case managedBy != "":
		return errs.E(errs.InvalidState, "%s %s is managed by substrate %s of pool %s: change the pool's policy instead", what, name, managedBy, pool)
	default:
		return errs.E(errs.InvalidState, "%s %s is not managed by substrate %s", what, name, c.Substrate)
	}
}

// usedBy refuses to delete a cluster that substrates have adopted.
func (c *clusterDoc) usedBy() error {
	if len(c.Substrates) == 0 {
		return nil
	}
	var uses []string
	for _, id := range slices.Sorted(maps.Keys(c.Substrates)) {
		uses = append(uses, fmt.Sprintf("substrate %s of pool %s", id, c.Substrates[id]))
	}
	return errs.E(errs.InvalidState, "cluster %s is used by %s: change the pool's policy before deleting it", c.Spec.Name, strings.Join(uses, ", "))
}
