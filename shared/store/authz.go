package store

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/model"
)

// Every call of the store is decided by auth.Authorize: the store reads
// the principal's grant (grantRef) in the same batch as the resource,
// admits the principal before it looks the resource up (auth.Admit, so
// that a stranger learns nothing), then authorizes the permission on what
// it found.

// grantRef is the document that says what the principal holds in its
// tenant: a user's member document, a substrate's own document.
func (s *Store) grantRef(p auth.Principal) *firestore.DocumentRef {
	if p.Kind() == auth.KindSubstrate {
		return s.substrateRef(p.TenantID(), p.ID())
	}
	return s.memberRef(p.TenantID(), p.ID())
}

// admit decodes the principal's grant from snap (grantRef's document)
// and admits it (auth.Admit).
func admit(p auth.Principal, snap *firestore.DocumentSnapshot) (auth.Grant, error) {
	var g auth.Grant
	exists := snap != nil && snap.Exists()
	switch p.Kind() {
	case auth.KindUser:
		if exists {
			g.Member = &auth.Member{}
			if err := snap.DataTo(g.Member); err != nil {
				return g, fmt.Errorf("decode member %s: %w", snap.Ref.Path, err)
			}
		}
	case auth.KindSubstrate:
		if exists {
			var d model.Substrate
			if err := snap.DataTo(&d); err != nil {
				return g, fmt.Errorf("decode substrate %s: %w", snap.Ref.Path, err)
			}
			if d.TenantID == p.TenantID() {
				g.Substrate = &auth.SubstrateGrant{Active: d.Active, PoolID: d.PoolID, Mode: d.Spec.Mode, AdoptClusterID: d.Spec.AdoptClusterID}
			}
		}
	}
	return g, auth.Admit(p, g)
}

// readCluster reads, in tx, the principal's grant and the cluster in one
// batch, admits the principal and decodes the cluster (NOT_FOUND when
// there is none or it is deleted): the first step of a call on one
// cluster, before its permission is decided.
func (s *Store) readCluster(tx *firestore.Transaction, p auth.Principal, clusterID string) (auth.Grant, *clusterDoc, error) {
	snaps, err := tx.GetAll([]*firestore.DocumentRef{s.grantRef(p), s.ClusterRef(p.TenantID(), clusterID)})
	if err != nil {
		return auth.Grant{}, nil, fmt.Errorf("read: %w", err)
	}
	grant, err := admit(p, snaps[0])
	if err != nil {
		return grant, nil, err
	}
	cl, err := decodeCluster(snaps[1], clusterID)
	return grant, cl, err
}

// clusterResource is a cluster as the authorizer reads it.
func clusterResource(c *clusterDoc) auth.Resource {
	return auth.Resource{ClusterID: c.ID, Pool: c.Spec.PoolID, ManagedBy: c.Spec.ManagedBy, AdoptedBy: c.AdoptedBy}
}

// nodePoolResource is a node pool of the cluster as the authorizer reads
// it.
func nodePoolResource(c *clusterDoc, p *model.NodePool) auth.Resource {
	r := clusterResource(c)
	r.NodePool, r.NodePoolManagedBy = true, p.Spec.ManagedBy
	return r
}

// isNotFound reports whether a Get failed because the document is missing
// (the client returns NotFound with a snapshot that does not exist).
func isNotFound(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if status.Code(e) == codes.NotFound {
			return true
		}
	}
	return false
}

// Grant reads and admits the principal's grant (auth.Admit): for a
// decision made outside a transaction (the substrates' queries), with
// the resource read after it.
func (s *Store) Grant(ctx context.Context, p auth.Principal) (auth.Grant, error) {
	snap, err := s.grantRef(p).Get(ctx)
	if err != nil && !isNotFound(err) {
		return auth.Grant{}, storageErr("read the caller's grant", err)
	}
	return admit(p, snap)
}
