package store

import (
	"context"
	"fmt"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/model"
)

// The reads of kubernetesSubstrates.plan: what a substrate's run would
// read, and who owns a pool, without a run or a transaction.

// ReadSubstrate reads a substrate as its run would (SubstrateRead); nil
// when there is none.
func (s *Store) ReadSubstrate(ctx context.Context, tenantID, id string) (*SubstrateRead, error) {
	snap, err := s.substrateRef(tenantID, id).Get(ctx)
	if err != nil && !isNotFound(err) {
		return nil, errs.Wrap(errs.Unavailable, err, "read substrate")
	}
	if snap == nil || !snap.Exists() {
		return nil, nil
	}
	r, err := s.LoadSubstrate(chain.NewReader(ctx, nil), snap)
	if err != nil {
		return nil, storageErr("read substrate", err)
	}
	return &r, nil
}

// ReadAdoption reads a cluster to adopt and its node pools as a new
// substrate's run would: nil when the cluster does not exist.
func (s *Store) ReadAdoption(ctx context.Context, tenantID, clusterID string) (*model.Cluster, []model.NodePool, error) {
	c, err := s.Cluster(ctx, tenantID, clusterID)
	if err != nil || c == nil {
		return nil, nil, err
	}
	pools, err := s.ActiveNodePools(ctx, tenantID, clusterID)
	if err != nil {
		return nil, nil, storageErr("read node pools", err)
	}
	return c, pools, nil
}

// PoolOwner is the tenant that owns the pool's ID ("" when none does
// yet).
func (s *Store) PoolOwner(ctx context.Context, poolID string) (string, error) {
	snap, err := s.poolRef(poolID).Get(ctx)
	if err != nil && !isNotFound(err) {
		return "", errs.Wrap(errs.Unavailable, err, "read pool")
	}
	if snap == nil || !snap.Exists() {
		return "", nil
	}
	var p Pool
	if err := snap.DataTo(&p); err != nil {
		return "", fmt.Errorf("decode pool %s: %w", poolID, err)
	}
	return p.TenantID, nil
}
