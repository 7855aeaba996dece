package store

import (
	"context"
	"encoding/base64"
	"encoding/json"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// The queries of kubernetesSubstrates.get, list and listNodes, each
// decided by auth.Authorize as the store's other calls are. They read
// outside a transaction: the principal's grant first (Grant), then the
// substrates.

// onSubstrate is a substrate as the authorizer reads it: its cluster, or
// the tenant while it has none. Reading a substrate takes
// compute:kubernetes:read there.
func onSubstrate(clusterID string) auth.Resource { return auth.Resource{ClusterID: clusterID} }

// GetSubstrate returns a substrate that is not deleted. Reading it takes
// compute:kubernetes:read on its cluster, or on the tenant while it has
// none.
func (s *Store) GetSubstrate(ctx context.Context, c auth.Principal, id string) (resource.Substrate, error) {
	g, err := s.Grant(ctx, c)
	if err != nil {
		return resource.Substrate{}, err
	}
	d, err := s.activeSubstrate(ctx, c.TenantID(), id)
	if err != nil {
		return resource.Substrate{}, err
	}
	v := d.View()
	if err := auth.Authorize(c, g, auth.PermRead, onSubstrate(v.ClusterID)); err != nil {
		return resource.Substrate{}, err
	}
	return v, nil
}

// activeSubstrate is a substrate that is not deleted: NOT_FOUND otherwise.
func (s *Store) activeSubstrate(ctx context.Context, tenantID, id string) (*model.Substrate, error) {
	d, err := s.Substrate(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	if d == nil || !d.Active {
		return nil, errs.E(errs.NotFound, "substrate %s not found", id)
	}
	return d, nil
}

// ListSubstrates returns the tenant's substrates that are not deleted and
// that the caller may read, of one pool when poolID is set, by creation.
func (s *Store) ListSubstrates(ctx context.Context, c auth.Principal, poolID string) ([]resource.Substrate, error) {
	g, err := s.Grant(ctx, c)
	if err != nil {
		return nil, err
	}
	subs, err := s.ActiveSubstrates(ctx, c.TenantID(), poolID)
	if err != nil {
		return nil, err
	}
	out := []resource.Substrate{}
	for _, d := range subs {
		v := d.View()
		if auth.Authorize(c, g, auth.PermRead, onSubstrate(v.ClusterID)) == nil {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		// A member who may read nothing here learns nothing either.
		if err := auth.Authorize(c, g, auth.PermRead, onSubstrate("")); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// nodesPage is a listNodes page token: the last node name, bound to the
// tenant and substrate so a token is not replayed elsewhere.
type nodesPage struct {
	TenantID    string `json:"t"`
	SubstrateID string `json:"s"`
	After       string `json:"a"`
}

// ListSubstrateNodes returns a page of the substrate's joined nodes, by
// name, and the token of the next page ("" after the last). Reading them
// takes what reading the substrate takes.
func (s *Store) ListSubstrateNodes(ctx context.Context, c auth.Principal, id string, pageSize int, pageToken string) ([]resource.SubstrateNode, string, error) {
	g, err := s.Grant(ctx, c)
	if err != nil {
		return nil, "", err
	}
	d, err := s.activeSubstrate(ctx, c.TenantID(), id)
	if err != nil {
		return nil, "", err
	}
	if err := auth.Authorize(c, g, auth.PermRead, onSubstrate(d.View().ClusterID)); err != nil {
		return nil, "", err
	}
	after := ""
	if pageToken != "" {
		var p nodesPage
		b, err := base64.RawURLEncoding.DecodeString(pageToken)
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		if err != nil || p.TenantID != c.TenantID() || p.SubstrateID != id || p.After == "" {
			return nil, "", errs.InvalidFields([]errs.FieldError{{Field: "pageToken", Reason: "is not a page token of this list"}})
		}
		after = p.After
	}
	nodes, err := s.JoinedNodes(ctx, c.TenantID(), id, after, pageSize+1)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(nodes) > pageSize {
		nodes = nodes[:pageSize]
		b, _ := json.Marshal(nodesPage{TenantID: c.TenantID(), SubstrateID: id, After: nodes[len(nodes)-1].Name})
		next = base64.RawURLEncoding.EncodeToString(b)
	}
	return nodes, next, nil
}
