package store

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/auth"
)

// decodeMember returns the caller's member document, or PERMISSION_DENIED
// revealing nothing when the caller has no binding in the tenant: the
// membership check comes before any lookup.
func decodeMember(snap *firestore.DocumentSnapshot) (*auth.Member, error) {
	var m *auth.Member
	if snap != nil && snap.Exists() {
		m = &auth.Member{}
		if err := snap.DataTo(m); err != nil {
			return nil, fmt.Errorf("decode member %s: %w", snap.Ref.Path, err)
		}
	}
	if err := auth.RequireMember(m); err != nil {
		return nil, err
	}
	return m, nil
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

// Member returns the caller's member document, or PERMISSION_DENIED
// revealing nothing when the caller has no binding in the tenant.
func (s *Store) Member(ctx context.Context, c Caller) (*auth.Member, error) {
	snap, err := s.memberRef(c.TenantID, c.Principal).Get(ctx)
	if err != nil && !isNotFound(err) {
		return nil, storageErr("read member", err)
	}
	return decodeMember(snap)
}

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
