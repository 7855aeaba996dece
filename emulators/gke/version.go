package gke

import (
	"fmt"
	"regexp"
	"strconv"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultVersions are the versions new clusters get per release channel,
// unless WithVersions replaces them. UNSPECIFIED (no channel) gets
// REGULAR's version, as GKE does.
var DefaultVersions = map[containerpb.ReleaseChannel_Channel]string{
	containerpb.ReleaseChannel_RAPID:    "1.34.1-gke.1100",
	containerpb.ReleaseChannel_REGULAR:  "1.33.4-gke.1000",
	containerpb.ReleaseChannel_STABLE:   "1.32.8-gke.1100",
	containerpb.ReleaseChannel_EXTENDED: "1.31.12-gke.1200",
}

var versionRE = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)-gke\.(\d+)$`)

// resolveVersion turns a requested version into a full one: "", "-" and
// "latest" mean def; anything else must be a full GKE version
// (1.33.4-gke.1000). GKE also accepts aliases like "1.33"; the emulator
// does not.
func resolveVersion(v, def string) (string, error) {
	switch v {
	case "", "-", "latest":
		return def, nil
	}
	if !versionRE.MatchString(v) {
		return "", status.Errorf(codes.InvalidArgument, "Version %q is invalid: want a full version like %q.", v, def)
	}
	return v, nil
}

// NextVersion is the version a release channel would move a cluster at v
// to: the next GKE build of the same patch release (1.33.4-gke.1000 →
// 1.33.4-gke.1100). A malformed v is returned as it is.
func NextVersion(v string) string {
	m := versionRE.FindStringSubmatch(v)
	if m == nil {
		return v
	}
	build, _ := strconv.Atoi(m[4])
	return fmt.Sprintf("%s.%s.%s-gke.%d", m[1], m[2], m[3], build+100)
}

// compareVersions orders two full GKE versions; malformed ones sort first.
func compareVersions(a, b string) int {
	pa, pb := versionRE.FindStringSubmatch(a), versionRE.FindStringSubmatch(b)
	for i := 1; i <= 4; i++ {
		var x, y int
		if pa != nil {
			x, _ = strconv.Atoi(pa[i])
		}
		if pb != nil {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}
