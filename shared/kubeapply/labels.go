package kubeapply

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// AnnotationPoolID, on every object of a substrate, holds the whole pool
// ID: LabelPool holds it only when it is a label value (PoolLabel).
const AnnotationPoolID = "better-compute.dev/substrate-pool-id"

// poolLabelCut is the length the readable part of a derived label value is
// cut to: with "-" and the 6-character hash, 63, the longest label value.
const poolLabelCut = 56

// PoolLabel is the value of LabelPool for a pool (API.md §9): the pool ID
// itself when it is a label value; otherwise the ID with every character
// outside [A-Za-z0-9._-] turned into '-', trimmed to begin and end with a
// letter or digit, cut to 56 characters, then '-' and the first 6
// characters of the lowercase base32 SHA-256 of the ID (the hash of the
// naming rule of node pools and clusters). Case is kept. An ID with no
// letter or digit at all (".", "__") leaves nothing before the hash: its
// value is the hash alone, which is a label value (base32 is letters and
// digits). Pool IDs of 1 to 128 characters of [A-Za-z0-9._:-] always
// give a label value; the empty ID gives "".
//
// Two IDs may derive one value (a pool named as another's derived value);
// AnnotationPoolID tells their objects apart.
func PoolLabel(poolID string) string {
	if poolID == "" || len(validation.IsValidLabelValue(poolID)) == 0 {
		return poolID
	}
	b := []byte(poolID)
	for i, c := range b {
		if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			b[i] = '-'
		}
	}
	s := strings.TrimFunc(string(b), func(r rune) bool { return r > 0x7f || !isAlnum(byte(r)) })
	if len(s) > poolLabelCut {
		s = s[:poolLabelCut]
	}
	sum := sha256.Sum256([]byte(poolID))
	h := strings.ToLower(base32.StdEncoding.EncodeToString(sum[:]))[:6]
	if s == "" {
		return h
	}
	return s + "-" + h
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
