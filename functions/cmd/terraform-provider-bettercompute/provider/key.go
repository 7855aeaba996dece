package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// The plugin protocol does not tell a provider the address of the
// resource it creates, so a create's idempotency key is made from what
// identifies the resource in the plan instead: the API's canonical form of
// the create request (shared/input's Canonical: the tenant, the cluster, the
// name and the whole spec, defaults applied, without the key). A retried
// apply of the same configuration sends the same key, and the API answers
// the resource the first try made (200, the same ID) instead of making a
// second one.
//
// The API keeps keys 24 hours, so destroying a resource and creating it
// again the same day would send the key of the first and get it back,
// deleted. The caller then derives a new key that also carries the ID it
// got back (after), which is as deterministic: a retry of that create
// meets the same deleted resource first and derives the same next key.

// maxKeyChain is how many deleted resources of the same request a create
// steps past before it gives up.
const maxKeyChain = 8

// idempotencyKey is the key of a create of kind (cluster, nodepool) whose
// canonical request is canonical, after the deleted resources of after
// (oldest first).
func idempotencyKey(kind string, canonical []byte, after ...string) string {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write(canonical)
	for _, id := range after {
		h.Write([]byte{0})
		h.Write([]byte(id))
	}
	// tofu-, the kind, and 40 hex digits: within the API's 128 characters
	// of [A-Za-z0-9._:-].
	return "tofu-" + kind + "-" + hex.EncodeToString(h.Sum(nil))[:40]
}

// isGone says whether a create answered a resource that an earlier life of
// the same request made and that was deleted since.
func isGone(state string) bool { return state == "deleted" || state == "deleting" }

// answer is what a create answered: the resource, its ID and its state.
type answer[T any] struct {
	res   *T
	id    string
	state string
}

// createOnce calls create with the key of the request, and, while the API
// answers a resource deleted since (the key's 24 hours outlive it), again
// with a key that also carries the IDs of those it answered.
func createOnce[T any](kind string, canonical []byte, create func(key string) (answer[T], error)) (*T, error) {
	var gone []string
	for {
		a, err := create(idempotencyKey(kind, canonical, gone...))
		if err != nil {
			return nil, err
		}
		if !isGone(a.state) {
			return a.res, nil
		}
		if gone = append(gone, a.id); len(gone) > maxKeyChain {
			return nil, fmt.Errorf("the API answered %d deleted resources made by earlier creates of the same configuration", len(gone))
		}
	}
}

// ID forms accepted by import.
const (
	clusterPrefix  = "kcl_"
	nodePoolPrefix = "knp_"
)

// importRef is what an import ID names.
type importRef struct{ tenant, clusterID, nodePoolID string }

// parseClusterImport reads a cluster's import ID: kcl_... or TENANT/kcl_...
func parseClusterImport(id string) (importRef, bool) {
	parts := strings.Split(id, "/")
	var r importRef
	switch len(parts) {
	case 1:
		r.clusterID = parts[0]
	case 2:
		r.tenant, r.clusterID = parts[0], parts[1]
		if r.tenant == "" {
			return r, false
		}
	default:
		return r, false
	}
	return r, strings.HasPrefix(r.clusterID, clusterPrefix) && len(r.clusterID) > len(clusterPrefix)
}

// parseNodePoolImport reads a node pool's import ID: kcl_.../knp_... or
// TENANT/kcl_.../knp_...
func parseNodePoolImport(id string) (importRef, bool) {
	parts := strings.Split(id, "/")
	var r importRef
	switch len(parts) {
	case 2:
		r.clusterID, r.nodePoolID = parts[0], parts[1]
	case 3:
		r.tenant, r.clusterID, r.nodePoolID = parts[0], parts[1], parts[2]
		if r.tenant == "" {
			return r, false
		}
	default:
		return r, false
	}
	ok := strings.HasPrefix(r.clusterID, clusterPrefix) && len(r.clusterID) > len(clusterPrefix) &&
		strings.HasPrefix(r.nodePoolID, nodePoolPrefix) && len(r.nodePoolID) > len(nodePoolPrefix)
	return r, ok
}
