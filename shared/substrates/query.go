package substrates

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// Queries answers kubernetesSubstrates.get, list and listNodes.
type Queries struct {
	fs    *firestore.Client
	store *store.Store
}

// NewQueries returns the substrates' queries over the store's Firestore.
func NewQueries(s *store.Store) *Queries { return &Queries{fs: s.Client(), store: s} }

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

func (q *Queries) get(ctx context.Context, tenantID, id string) (*Substrate, error) {
	snap, err := substrateRef(q.fs, tenantID, id).Get(ctx)
	if err != nil && !isNotFound(err) {
		return nil, errs.Wrap(errs.Unavailable, err, "read substrate")
	}
	var d Substrate
	if snap == nil || !snap.Exists() {
		return nil, errs.E(errs.NotFound, "substrate %s not found", id)
	}
	if err := snap.DataTo(&d); err != nil {
		return nil, fmt.Errorf("decode substrate %s: %w", id, err)
	}
	if !d.Active {
		return nil, errs.E(errs.NotFound, "substrate %s not found", id)
	}
	return &d, nil
}

// List returns the tenant's substrates that are not deleted and that the
// caller may read, of one pool when poolID is set, by creation.
func (q *Queries) List(ctx context.Context, c store.Caller, poolID string) ([]resource.Substrate, error) {
	m, err := q.store.Member(ctx, c)
	if err != nil {
		return nil, err
	}
	query := q.fs.Collection("tenants").Doc(c.TenantID).Collection(Kind).Where("active", "==", true)
	if poolID != "" {
		query = query.Where("poolId", "==", poolID)
	}
	snaps, err := query.OrderBy("createdAt", firestore.Asc).Documents(ctx).GetAll()
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "list substrates")
	}
	out := []resource.Substrate{}
	for _, snap := range snaps {
		var d Substrate
		if err := snap.DataTo(&d); err != nil {
			return nil, fmt.Errorf("decode %s: %w", snap.Ref.Path, err)
		}
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
	query := nodesRef(q.fs, c.TenantID, id).OrderBy(firestore.DocumentID, firestore.Asc).Limit(pageSize + 1)
	if pageToken != "" {
		var p nodesPage
		b, err := base64.RawURLEncoding.DecodeString(pageToken)
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		if err != nil || p.TenantID != c.TenantID || p.SubstrateID != id || p.After == "" {
			return nil, "", errs.InvalidFields([]errs.FieldError{{Field: "pageToken", Reason: "is not a page token of this list"}})
		}
		query = query.StartAfter(p.After)
	}
	snaps, err := query.Documents(ctx).GetAll()
	if err != nil {
		return nil, "", errs.Wrap(errs.Unavailable, err, "list nodes")
	}
	next := ""
	if len(snaps) > pageSize {
		snaps = snaps[:pageSize]
		b, _ := json.Marshal(nodesPage{TenantID: c.TenantID, SubstrateID: id, After: snaps[len(snaps)-1].Ref.ID})
		next = base64.RawURLEncoding.EncodeToString(b)
	}
	nodes := make([]resource.SubstrateNode, len(snaps))
	for i, snap := range snaps {
		if err := snap.DataTo(&nodes[i]); err != nil {
			return nil, "", fmt.Errorf("decode %s: %w", snap.Ref.Path, err)
		}
		nodes[i].JoinedAt = nodes[i].JoinedAt.UTC()
	}
	return nodes, next, nil
}
