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

// clusterList is the answer of kubernetesClusters.list.
type clusterList struct {
	Clusters      []resource.Cluster `json:"clusters"`
	NextPageToken string             `json:"nextPageToken"`
}

func (a *api) createCluster() httpapi.Method[*input.CreateCluster] {
	return httpapi.Method[*input.CreateCluster]{
		Name:   "kubernetesClusters.create",
		Decode: input.DecodeCreateCluster,
		Call: func(ctx context.Context, principal string, in *input.CreateCluster) (any, error) {
			ctx = logging.With(ctx, "tenantId", in.TenantID, "poolId", in.PoolID)
			req := store.CreateClusterRequest{
				PoolID:         in.PoolID,
				Spec:           in.Spec,
				NodePools:      in.NodePools,
				IdempotencyKey: in.IdempotencyKey,
				RequestHash:    store.RequestHash(in.Canonical()),
			}
			res, err := a.Store.CreateCluster(ctx, auth.User(in.TenantID, principal), req)
			if err != nil {
				return nil, err
			}
			a.afterCommit(ctx, res.Events, res.Kick)
			return res.Cluster, nil
		},
	}
}

func (a *api) getCluster() httpapi.Method[*input.ClusterRef] {
	return httpapi.Method[*input.ClusterRef]{
		Name:   "kubernetesClusters.get",
		Decode: input.DecodeClusterRef,
		Call: func(ctx context.Context, principal string, in *input.ClusterRef) (any, error) {
			return a.Store.GetCluster(ctx, auth.User(in.TenantID, principal), in.ClusterID)
		},
	}
}

func (a *api) listClusters() httpapi.Method[*input.ListClusters] {
	return httpapi.Method[*input.ListClusters]{
		Name:   "kubernetesClusters.list",
		Decode: input.DecodeListClusters,
		Call: func(ctx context.Context, principal string, in *input.ListClusters) (any, error) {
			clusters, next, err := a.Store.ListClusters(ctx, auth.User(in.TenantID, principal),
				store.ListClustersRequest{PoolID: in.PoolID, PageSize: in.PageSize, PageToken: in.PageToken})
			if err != nil {
				return nil, err
			}
			return clusterList{Clusters: clusters, NextPageToken: next}, nil
		},
	}
}

func (a *api) deleteCluster() httpapi.Method[*input.ClusterRef] {
	return httpapi.Method[*input.ClusterRef]{
		Name:   "kubernetesClusters.delete",
		Decode: input.DecodeClusterRef,
		Call: func(ctx context.Context, principal string, in *input.ClusterRef) (any, error) {
			ctx = logging.With(ctx, "tenantId", in.TenantID, "clusterId", in.ClusterID)
			res, err := a.Store.DeleteCluster(ctx, auth.User(in.TenantID, principal), in.ClusterID)
			if err != nil {
				return nil, err
			}
			a.afterCommit(ctx, res.Events, res.Kick)
			return res.Cluster, nil
		},
	}
}
