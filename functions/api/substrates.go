package api

import (
	"context"
	"net/http"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/input"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// substrateList is the answer of kubernetesSubstrates.list.
type substrateList struct {
	Substrates []resource.Substrate `json:"substrates"`
}

// nodeList is the answer of kubernetesSubstrates.listNodes.
type nodeList struct {
	Nodes         []resource.SubstrateNode `json:"nodes"`
	NextPageToken string                   `json:"nextPageToken"`
}

func (a *api) getSubstrate() httpapi.Method[*input.SubstrateRef] {
	return httpapi.Method[*input.SubstrateRef]{
		Name:   "kubernetesSubstrates.get",
		Decode: input.DecodeSubstrateRef,
		Call: func(ctx context.Context, principal string, in *input.SubstrateRef) (any, error) {
			return a.Store.GetSubstrate(ctx, auth.User(in.TenantID, principal), in.SubstrateID)
		},
	}
}

func (a *api) listSubstrates() httpapi.Method[*input.ListSubstrates] {
	return httpapi.Method[*input.ListSubstrates]{
		Name:   "kubernetesSubstrates.list",
		Decode: input.DecodeListSubstrates,
		Call: func(ctx context.Context, principal string, in *input.ListSubstrates) (any, error) {
			list, err := a.Store.ListSubstrates(ctx, auth.User(in.TenantID, principal), in.PoolID)
			if err != nil {
				return nil, err
			}
			return substrateList{Substrates: list}, nil
		},
	}
}

func (a *api) listSubstrateNodes() httpapi.Method[*input.ListSubstrateNodes] {
	return httpapi.Method[*input.ListSubstrateNodes]{
		Name:   "kubernetesSubstrates.listNodes",
		Decode: input.DecodeListSubstrateNodes,
		Call: func(ctx context.Context, principal string, in *input.ListSubstrateNodes) (any, error) {
			nodes, next, err := a.Store.ListSubstrateNodes(ctx, auth.User(in.TenantID, principal),
				in.SubstrateID, in.PageSize, in.PageToken)
			if err != nil {
				return nil, err
			}
			return nodeList{Nodes: nodes, NextPageToken: next}, nil
		},
	}
}

// planSubstrate answers what the pool's substrate would do for the pool
// given, changing nothing.
func (a *api) planSubstrate() httpapi.Method[*input.PlanSubstrate] {
	return httpapi.Method[*input.PlanSubstrate]{
		Name:   "kubernetesSubstrates.plan",
		Decode: input.DecodePlanSubstrate,
		Call: func(ctx context.Context, principal string, in *input.PlanSubstrate) (any, error) {
			p := &in.Pool
			ev := model.PoolEvent{TenantID: p.TenantID, PoolID: p.ID, Version: p.Version, Want: p.Want()}
			return a.Previewer.Plan(ctx, auth.User(in.TenantID, principal), ev)
		},
	}
}

// join is called by bcd with the substrate's join token, not a user's
// token: the token is its own authenticator.
func (a *api) join() (http.Handler, error) {
	m := httpapi.Method[*input.Join]{
		Name:   "kubernetesSubstrates.join",
		Decode: input.DecodeJoin,
		Call: func(ctx context.Context, principal string, in *input.Join) (any, error) {
			return a.Joiner.Join(ctx, principal, in.NodeName, in.ProviderID)
		},
	}
	return httpapi.Handler(a.Joiner, bounded(a.Timeout, m))
}
