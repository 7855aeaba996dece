package substrates

import (
	"context"
	"encoding/base64"
	"encoding/json"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// Queries answers kubernetesSubstrates.get, list and listNodes.
type Queries struct {
	store *store.Store
}

// NewQueries returns the substrates' queries over the store.
func NewQueries(s *store.Store) *Queries { return &Queries{store: s} }

// Get returns a substrate that is not deleted. Reading it takes
// compute:kubernetes:read on its cluster, or on the tenant while it has
// none.
func (q *Queries) Get(ctx context.Context, c store.Caller, id string) (resource.Substrate, error) {
	m, err := q.store.Member(ctx, c)
	if err != nil {
		return resource.Substrate{}, err
	}
	d, err := q.get(ctx, c.TenantID, id)
	if err != nil {
		return resource.Substrate{}, err
	}
	v := d.View()
	if err := m.Require(auth.PermRead, v.ClusterID); err != nil {
		return resource.Substrate{}, err
	}
	return v, nil
}

func (q *Queries) get(ctx context.Context, tenantID, id string) (*lifecycle.Substrate, error) {
	d, err := q.store.Substrate(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	if d == nil || !d.Active {
		return nil, errs.E(errs.NotFound, "substrate %s not found", id)
	}
	return d, nil
}

// List returns the tenant's substrates that are not deleted and that the
// caller may read, of one pool when poolID is set, by creation.
func (q *Queries) List(ctx context.Context, c store.Caller, poolID string) ([]resource.Substrate, error) {
	m, err := q.store.Member(ctx, c)
	if err != nil {
		return nil, err
	}
	subs, err := q.store.ActiveSubstrates(ctx, c.TenantID, poolID)
	if err != nil {
		return nil, err
	}
	out := []resource.Substrate{}
	for _, d := range subs {
		v := d.View()
		if m.Allows(auth.PermRead, v.ClusterID) {
			out = append(out, v)
		}
	}
	if len(out) == 0 && !m.Allows(auth.PermRead, "") {
		// A member who may read nothing here learns nothing either.
		if err := m.Require(auth.PermRead, ""); err != nil {
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

// ListNodes returns a page of the substrate's joined nodes, by name.
func (q *Queries) ListNodes(ctx context.Context, c store.Caller, id string, pageSize int, pageToken string) ([]resource.SubstrateNode, string, error) {
	m, err := q.store.Member(ctx, c)
	if err != nil {
		return nil, "", err
	}
	d, err := q.get(ctx, c.TenantID, id)
	if err != nil {
		return nil, "", err
	}
	if err := m.Require(auth.PermRead, d.View().ClusterID); err != nil {
		return nil, "", err
	}
	after := ""
	if pageToken != "" {
		var p nodesPage
		b, err := base64.RawURLEncoding.DecodeString(pageToken)
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		if err != nil || p.TenantID != c.TenantID || p.SubstrateID != id || p.After == "" {
			return nil, "", errs.InvalidFields([]errs.FieldError{{Field: "pageToken", Reason: "is not a page token of this list"}})
		}
		after = p.After
	}
	nodes, err := q.store.JoinedNodes(ctx, c.TenantID, id, after, pageSize+1)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(nodes) > pageSize {
		nodes = nodes[:pageSize]
		b, _ := json.Marshal(nodesPage{TenantID: c.TenantID, SubstrateID: id, After: nodes[len(nodes)-1].Name})
		next = base64.RawURLEncoding.EncodeToString(b)
	}
	return nodes, next, nil
}
