package lifecycle

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// The rules of what substrates manage (API.md §9): the clusters and node
// pools a substrate makes are marked managed by it, only it may change
// them, and it may change nothing else; a cluster it adopts stays the
// tenant's, but may not be deleted while a substrate uses it.

// MayChange refuses a change of what a substrate manages (managedBy, of
// pool) by anyone but that substrate, and a substrate's change of what it
// does not manage. substrate is the caller's substrate, "" for a tenant's
// own call; what and name name the object in the refusal.
func MayChange(substrate, managedBy, pool, what, name string) error {
	switch {
	case managedBy == substrate:
		return nil
	case managedBy != "":
		return errs.E(errs.InvalidState, "%s %s is managed by substrate %s of pool %s: change the pool's policy instead", what, name, managedBy, pool)
	default:
		return errs.E(errs.InvalidState, "%s %s is not managed by substrate %s", what, name, substrate)
	}
}

// MayAddNodePool refuses a node pool in a substrate's cluster by anyone but
// that substrate: its cluster holds its node pools and no other.
func MayAddNodePool(substrate string, c *model.Cluster) error {
	if m := c.Spec.ManagedBy; m != "" && m != substrate {
		return MayChange(substrate, m, c.Spec.ManagedPool, "cluster", c.Spec.Name)
	}
	return nil
}

// Managed marks a node pool that a substrate (of pool) creates as its own;
// substrate is "" for a tenant's own pool.
func Managed(spec model.NodePoolSpec, substrate, pool string) model.NodePoolSpec {
	spec.ManagedBy, spec.ManagedPool = substrate, pool
	return spec
}

// MayDeleteCluster refuses to delete a cluster that substrates have
// adopted (usedBy: substrate ID → pool ID).
func MayDeleteCluster(c *model.Cluster, usedBy map[string]string) error {
	if len(usedBy) == 0 {
		return nil
	}
	var uses []string
	for _, id := range slices.Sorted(maps.Keys(usedBy)) {
		uses = append(uses, fmt.Sprintf("substrate %s of pool %s", id, usedBy[id]))
	}
	return errs.E(errs.InvalidState, "cluster %s is used by %s: change the pool's policy before deleting it", c.Spec.Name, strings.Join(uses, ", "))
}

// MayAdopt refuses the adoption of a cluster by the substrate (of a pool
// on accountID) unless it is a standard cluster on that account, not
// being deleted, not made by a substrate and adopted by no other
// substrate: a cluster has one adopter at most, so that two pools never
// share it.
func MayAdopt(c *model.Cluster, substrate, accountID string) error {
	switch {
	case c.Spec.Mode != resource.ModeStandard:
		return errs.E(errs.InvalidState, "cluster %s is an %s cluster: a substrate adopts only a standard cluster", c.ID, c.Spec.Mode)
	case c.Spec.AccountID != accountID:
		return errs.E(errs.InvalidState, "cluster %s is on account %s, not on the substrate's account %s", c.ID, c.Spec.AccountID, accountID)
	case c.Spec.Deleting:
		return errs.E(errs.InvalidState, "cluster %s is being deleted", c.ID)
	case c.Spec.ManagedBy != "":
		return errs.E(errs.InvalidState, "cluster %s is managed by substrate %s of pool %s", c.ID, c.Spec.ManagedBy, c.Spec.ManagedPool)
	}
	for _, id := range slices.Sorted(maps.Keys(c.AdoptedBy)) {
		if id != substrate {
			return errs.E(errs.InvalidState, "cluster %s is adopted by substrate %s of pool %s: a cluster serves one pool", c.ID, id, c.AdoptedBy[id])
		}
	}
	return nil
}
