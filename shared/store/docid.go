package store

// DocID, the one encoding of every external string that becomes a
// Firestore document ID, and the tenant's document under which all of a
// tenant's documents live. The store builds every path of the data model
// with them; tests that seed or inspect Firestore directly build theirs
// with them too, so that they meet the store's paths.

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"unicode/utf8"

	"cloud.google.com/go/firestore"
)

// Firestore's rules for a document ID: valid UTF-8, at most 1,500 bytes,
// no '/', not "." or "..", and not of the reserved form __.*__.
const maxIDBytes = 1500

// Encoded document IDs start with encodedPrefix, which no pattern of the
// contract produces (tenant and pool IDs are [A-Za-z0-9._:-], names
// lowercase, resource IDs TypeIDs) and which base64url never produces.
// hashedPrefix marks the few strings too long to encode whole.
const (
	encodedPrefix = "~"
	hashedPrefix  = "~~"
)

// maxEncodedInput is the longest input whose base64url form, with the
// prefix, still fits in a document ID.
var maxEncodedInput = base64.RawURLEncoding.DecodedLen(maxIDBytes - len(encodedPrefix))

// DocID returns the Firestore document ID under which an external string
// (a tenant ID, a principal, a pool, account or cluster name, a resource
// ID...) is stored. Every string the contract accepts must be served, but
// Firestore cannot store some of them as they stand: ".", "..", "__x__",
// a principal holding '/'.
//
// A string that is already a valid document ID, and does not start with
// '~', is its own ID, so data written before this encoding keeps its
// paths. Any other string is '~' and its base64url form (a string that
// starts with '~' included, so that no encoded ID equals a string that was
// kept as it is). A string whose base64url form would pass Firestore's
// 1,500 bytes is "~~" and the base64url SHA-256 of it, which base64url
// cannot start, so the three forms never meet. ID is therefore
// injective (up to SHA-256 collisions, for strings over 1,124 bytes) and
// stable: the same string always has the same ID.
func DocID(s string) string {
	if safeID(s) {
		return s
	}
	if len(s) > maxEncodedInput {
		h := sha256.Sum256([]byte(s))
		return hashedPrefix + base64.RawURLEncoding.EncodeToString(h[:])
	}
	return encodedPrefix + base64.RawURLEncoding.EncodeToString([]byte(s))
}

// safeID reports whether s is stored as it stands: a valid document ID
// that is not of the encoded form.
func safeID(s string) bool {
	return s != "" && len(s) <= maxIDBytes && utf8.ValidString(s) &&
		s != "." && s != ".." && !strings.Contains(s, "/") &&
		!strings.HasPrefix(s, encodedPrefix) &&
		!(len(s) >= 4 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__"))
}

// Collection names that tests and the console spell through the store.
const (
	TenantsCollection = "tenants"
	// OutboxCollection holds each tenant's events not yet published
	// (tenants/{t}/outbox/{eventId}), as the store writes them
	// (outbox.Collection).
	OutboxCollection = "outbox"
)

// TenantDoc returns the document of a tenant, under which all its documents
// live.
func TenantDoc(fs *firestore.Client, tenantID string) *firestore.DocumentRef {
	return fs.Collection(TenantsCollection).Doc(DocID(tenantID))
}
