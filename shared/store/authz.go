package store

import (
	"errors"
	"fmt"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/auth"
)

// The permissions the store's calls decide on.
const (
	PermRead   = auth.PermRead
	PermUpdate = auth.PermUpdate
	PermCreate = auth.PermCreate
	PermDelete = auth.PermDelete
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

// authorize is the permission check, after the resource was found.
func authorize(m *auth.Member, perm auth.Permission, clusterID string) error {
	return m.Require(perm, clusterID)
}

func allows(m *auth.Member, perm auth.Permission, clusterID string) bool {
	return m.Allows(perm, clusterID)
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
