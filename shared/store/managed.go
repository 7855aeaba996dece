package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
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

// AdoptCluster records that the caller's substrate uses the tenant's
// cluster, which must be a standard cluster on the account, not being
// deleted and not made by another substrate. The cluster's spec is not
// written: adopting changes nothing the tenant asked for.
func (s *Store) AdoptCluster(ctx context.Context, c Caller, clusterID, accountID string) (resource.Cluster, error) {
	var view resource.Cluster
	ref := s.ClusterRef(c.TenantID, clusterID)
	err := s.transact(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("read cluster: %w", err)
		}
		cl, err := decodeCluster(snap, clusterID)
		if err != nil {
			return err
		}
		view = cl.View()
		switch {
		case cl.Spec.Mode != resource.ModeStandard:
			return errs.E(errs.InvalidState, "cluster %s is an %s cluster: a substrate adopts only a standard cluster", clusterID, cl.Spec.Mode)
		case cl.Spec.AccountID != accountID:
			return errs.E(errs.InvalidState, "cluster %s is on account %s, not on the substrate's account %s", clusterID, cl.Spec.AccountID, accountID)
		case cl.Spec.Deleting:
			return errs.E(errs.InvalidState, "cluster %s is being deleted", clusterID)
		case cl.Spec.ManagedBy != "":
			return errs.E(errs.InvalidState, "cluster %s is managed by substrate %s of pool %s", clusterID, cl.Spec.ManagedBy, cl.Spec.ManagedPool)
		}
		if cl.Substrates[c.Substrate] == c.Pool {
			return nil
		}
		return tx.Update(ref, []firestore.Update{{FieldPath: firestore.FieldPath{"substrates", c.Substrate}, Value: c.Pool}})
	})
	if err != nil {
		return resource.Cluster{}, storageErr("adopt cluster", err)
	}
	return view, nil
}

// ReleaseCluster records that the substrate no longer uses the cluster.
func (s *Store) ReleaseCluster(ctx context.Context, tenantID, clusterID, substrateID string) error {
	ref := s.ClusterRef(tenantID, clusterID)
	_, err := ref.Update(ctx, []firestore.Update{{FieldPath: firestore.FieldPath{"substrates", substrateID}, Value: firestore.Delete}})
	if err != nil && !isNotFound(err) {
		return storageErr("release cluster", err)
	}
	return nil
}
