package store

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/auth"
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

// AdoptCluster records that the caller's substrate uses the tenant's
// cluster (lifecycle.MayAdopt). The cluster's spec is not written:
// adopting changes nothing the tenant asked for.
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
		if err := lifecycle.MayAdopt(&cl.Cluster, accountID); err != nil {
			return err
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
