package store

import (
	"encoding/base64"
	"strings"
	"testing"
	"unicode/utf8"
)

// decodeID returns the string ID made id from, and false for an ID
// ID cannot have made or made by hashing (which keeps too little to
// say). That every ID decodes back to its string proves ID injective.
func decodeID(id string) (string, bool) {
	if !strings.HasPrefix(id, encodedPrefix) {
		return id, safeID(id)
	}
	if strings.HasPrefix(id, hashedPrefix) {
		return "", false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(id[len(encodedPrefix):])
	if err != nil || safeID(string(b)) {
		return "", false
	}
	return string(b), true
}

// validFirestoreID applies Firestore's rules for a document ID.
func validFirestoreID(id string) bool {
	return id != "" && len(id) <= 1500 && utf8.ValidString(id) && id != "." && id != ".." &&
		!strings.Contains(id, "/") && !(len(id) >= 4 && strings.HasPrefix(id, "__") && strings.HasSuffix(id, "__"))
}

func TestID(t *testing.T) {
	long := strings.Repeat("x", 1501)
	tests := []struct {
		in, want string
	}{
		// IDs Firestore takes stay as they are: the paths of data
		// written before the encoding do not move.
		{"acme", "acme"},
		{"acme-1.2:3_4", "acme-1.2:3_4"},
		{"kcl_01jd0000000000000000000000", "kcl_01jd0000000000000000000000"},
		{"alice", "alice"},
		{"alice@example.com", "alice@example.com"},
		{"___", "___"},
		{"__x", "__x"},
		{"a__b__", "a__b__"},
		{".x", ".x"},
		{"...", "..."},
		{"élan", "élan"},
		{strings.Repeat("y", 1500), strings.Repeat("y", 1500)},
		// Those it refuses are encoded.
		{"", "~"},
		{".", "~Lg"},
		{"..", "~Li4"},
		{"__x__", "~X194X18"},
		{"____", "~X19fXw"},
		{"__acme__", "~X19hY21lX18"},
		{"a/b", "~YS9i"},
		{"alice/../bob", "~YWxpY2UvLi4vYm9i"},
		{"/", "~Lw"},
		{"\xff", "~_w"},
		// So is a string of the encoded form, else "~YS9i" would share
		// the document of "a/b".
		{"~YS9i", "~fllTOWk"},
		{"~", "~fg"},
	}
	for _, tt := range tests {
		got := DocID(tt.in)
		if got != tt.want {
			t.Errorf("DocID(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if !validFirestoreID(got) {
			t.Errorf("DocID(%q) = %q, not a valid Firestore document ID", tt.in, got)
		}
	}
	if h := DocID(long); !strings.HasPrefix(h, "~~") || len(h) != 2+43 || h == DocID(long+"x") {
		t.Errorf("ID of 1,501 bytes = %q, want ~~ and a distinct hash", h)
	}
	// The longest string encoded whole fills a document ID exactly.
	edge := strings.Repeat("/", maxEncodedInput)
	if got := DocID(edge); len(got) != 1500 || strings.HasPrefix(got, "~~") {
		t.Errorf("ID of %d bytes has %d bytes (%.3q...), want 1500, encoded whole", maxEncodedInput, len(got), got)
	}
	if got := DocID(edge + "/"); !strings.HasPrefix(got, "~~") {
		t.Errorf("ID of %d bytes = %.3q..., want hashed", maxEncodedInput+1, got)
	}
}

// FuzzID checks, for any two strings, that ID gives a valid
// Firestore document ID, the same one each time, that decodes back to the
// string (so no two strings share one), and that two strings of distinct
// IDs are distinct.
func FuzzID(f *testing.F) {
	for _, s := range []string{"", ".", "..", "__x__", "__acme__", "a/b", "alice/../bob", "~", "~YS9i", "~~", "acme", "\xff\xfe", strings.Repeat("é", 800)} {
		f.Add(s, "~"+s)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, s := range []string{a, b} {
			id := DocID(s)
			if !validFirestoreID(id) {
				t.Fatalf("DocID(%q) = %q, not a valid Firestore document ID", s, id)
			}
			if again := DocID(s); again != id {
				t.Fatalf("DocID(%q) = %q, then %q", s, id, again)
			}
			if safeID(s) && id != s {
				t.Fatalf("DocID(%q) = %q, want the ID itself", s, id)
			}
			if strings.HasPrefix(id, hashedPrefix) {
				if len(s) <= maxEncodedInput {
					t.Fatalf("DocID(%q) = %q, hashed though short enough to encode", s, id)
				}
				continue
			}
			if got, ok := decodeID(id); !ok || got != s {
				t.Fatalf("DocID(%q) = %q, which decodes to %q, %v", s, id, got, ok)
			}
		}
		if a != b && DocID(a) == DocID(b) {
			t.Fatalf("DocID(%q) = DocID(%q) = %q", a, b, DocID(a))
		}
	})
}
