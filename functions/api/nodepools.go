package api

import (
	"context"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/input"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// nodePoolList is the answer of kubernetesNodePools.list.
type nodePoolList struct {
	NodePools []resource.NodePool `json:"nodePools"`
}

func (a *api) createNodePool() httpapi.Method[*input.CreateNodePool] {
	return httpapi.Method[*input.CreateNodePool]{
		Name:   "kubernetesNodePools.create",
		Decode: input.DecodeCreateNodePool,
		Call: func(ctx context.Context, principal string, in *input.CreateNodePool) (any, error) {
			ctx = logging.With(ctx, "tenantId", in.TenantID, "clusterId", in.ClusterID)
			res, err := a.Store.CreateNodePool(ctx, auth.User(in.TenantID, principal), store.CreateNodePoolRequest{
				ClusterID:      in.ClusterID,
				Spec:           in.Spec,
				IdempotencyKey: in.IdempotencyKey,
				RequestHash:    store.RequestHash(in.Canonical()),
			})
			if err != nil {
				return nil, err
			}
			a.afterCommit(ctx, res.Events, res.Kick)
			return res.NodePool, nil
		},
	}
}

func (a *api) listNodePools() httpapi.Method[*input.ClusterRef] {
	return httpapi.Method[*input.ClusterRef]{
		Name:   "kubernetesNodePools.list",
		Decode: input.DecodeClusterRef,
		Call: func(ctx context.Context, principal string, in *input.ClusterRef) (any, error) {
			pools, err := a.Store.ListNodePools(ctx, auth.User(in.TenantID, principal), in.ClusterID)
			if err != nil {
				return nil, err
			}
			return nodePoolList{NodePools: pools}, nil
		},
	}
}

func (a *api) updateNodePool() httpapi.Method[*input.UpdateNodePool] {
	return httpapi.Method[*input.UpdateNodePool]{
		Name:   "kubernetesNodePools.update",
		Decode: input.DecodeUpdateNodePool,
		Call: func(ctx context.Context, principal string, in *input.UpdateNodePool) (any, error) {
			ctx = logging.With(ctx, "tenantId", in.TenantID, "clusterId", in.ClusterID, "nodePoolId", in.NodePoolID)
			res, err := a.Store.UpdateNodePool(ctx, auth.User(in.TenantID, principal), in.ClusterID, in.NodePoolID, in.Apply)
			if err != nil {
				return nil, err
			}
			a.afterCommit(ctx, res.Events, res.Kick)
			return res.NodePool, nil
		},
	}
}

func (a *api) deleteNodePool() httpapi.Method[*input.NodePoolRef] {
	return httpapi.Method[*input.NodePoolRef]{
		Name:   "kubernetesNodePools.delete",
		Decode: input.DecodeNodePoolRef,
		Call: func(ctx context.Context, principal string, in *input.NodePoolRef) (any, error) {
			ctx = logging.With(ctx, "tenantId", in.TenantID, "clusterId", in.ClusterID, "nodePoolId", in.NodePoolID)
			res, err := a.Store.DeleteNodePool(ctx, auth.User(in.TenantID, principal), in.ClusterID, in.NodePoolID)
			if err != nil {
				return nil, err
			}
			a.afterCommit(ctx, res.Events, res.Kick)
			return res.NodePool, nil
		},
	}
}
