package substrates

import (
	"crypto/sha256"
	"encoding/base32"
	"regexp"
	"strconv"
	"strings"

	"github.com/better-compute/kubernetes/shared/store"
)

// validName is the node pool and cluster name rule of API.md §5.
var validName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$`)

// NodePoolName is the name of a flavor's node pool: bc-<pool>-<flavor>, or
// when that is not a valid name, a valid one derived from it
// deterministically (so a retry finds the same pool) and unique to the
// pair (API.md §9).
func NodePoolName(poolID, flavor string) string {
	return validNameFor("bc-"+poolID+"-"+flavor, poolID+"/"+flavor)
}

// FlavorPoolName is the name of a flavor's n-th node pool: NodePoolName
// for n = 1, and for each replacement (n = 2, 3, ...) the same rule
// applied to bc-<pool>-<flavor>-<n>, with <pool>/<flavor>/<n> hashed.
func FlavorPoolName(poolID, flavor string, n int) string {
	if n <= 1 {
		return NodePoolName(poolID, flavor)
	}
	suffix := "-" + strconv.Itoa(n)
	return validNameFor("bc-"+poolID+"-"+flavor+suffix, poolID+"/"+flavor+"/"+strconv.Itoa(n))
}

// ClusterName is the name of the cluster a substrate creates: bc-<pool>,
// made valid as NodePoolName does.
func ClusterName(poolID string) string {
	return validNameFor("bc-"+poolID, poolID)
}

// validNameFor returns name when valid; else name lowercased with every
// other character turned into '-', cut to 33 characters, followed by '-'
// and the first 6 characters of the lowercase base32 SHA-256 of key.
func validNameFor(name, key string) string {
	if validName.MatchString(name) {
		return name
	}
	b := []byte(strings.ToLower(name))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) > 33 {
		b = b[:33]
	}
	sum := sha256.Sum256([]byte(key))
	h := strings.ToLower(base32.StdEncoding.EncodeToString(sum[:]))
	return string(b) + "-" + h[:6]
}

// Kind is the chain kind of substrates: the collection of their documents
// under each tenant, and the Kind of their kicks.
const Kind = store.SubstratesKind
