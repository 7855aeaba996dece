package gke

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
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

// minorRE is a version alias GKE accepts: a minor (1.33) or a patch
// (1.33.4) release, which stands for its newest supported build.
var minorRE = regexp.MustCompile(`^(\d+)\.(\d+)(?:\.(\d+))?$`)

// validVersions are the versions the simulator offers, newest first:
// each release channel's. (A full version of one of their minor releases
// is accepted too, as the next build UpgradeMaster moves a cluster to.)
func (s *GServer) validVersions() []string {
	var out []string
	for _, v := range s.versions {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return compareVersions(b, a) })
	return out
}

// resolveVersion turns a requested version into a full one, as GKE does:
// "", "-" and "latest" mean def; an alias (1.33, 1.33.4) the newest
// valid version of that release no newer than limit ("" for none), or
// else its newest; a full version (1.33.4-gke.1000) itself. A version of a
// minor release the simulator does not serve is INVALID_ARGUMENT in GKE's
// words, `Master version "1.29.1-gke.100" is unsupported.` (kind
// "Master") or `Node version "..." is unsupported.` (kind "Node").
func (s *GServer) resolveVersion(kind, v, def, limit string) (string, error) {
	switch v {
	case "", "-", "latest":
		return def, nil
	}
	valid := s.validVersions()
	unsupported := status.Errorf(codes.InvalidArgument, "%s version %q is unsupported.", kind, v)
	if m := minorRE.FindStringSubmatch(v); m != nil {
		var best string
		for _, x := range valid {
			f := versionRE.FindStringSubmatch(x)
			if f[1] != m[1] || f[2] != m[2] || (m[3] != "" && f[3] != m[3]) {
				continue
			}
			if limit == "" || compareVersions(x, limit) <= 0 {
				return x, nil
			}
			if best == "" {
				best = x
			}
		}
		if best == "" {
			return "", unsupported
		}
		return best, nil
	}
	f := versionRE.FindStringSubmatch(v)
	if f == nil {
		return "", status.Errorf(codes.InvalidArgument, "Version %q is invalid.", v)
	}
	if !slices.ContainsFunc(valid, func(x string) bool {
		g := versionRE.FindStringSubmatch(x)
		return g[1] == f[1] && g[2] == f[2]
	}) {
		return "", unsupported
	}
	return v, nil
}

// channelOffering is the channel GKE enrolls a cluster in that asks for
// version v and no channel: the most stable of STABLE, REGULAR and RAPID
// that offers it (recorded: a 1.34 cluster created without a channel was
// enrolled in STABLE, which offered 1.34), REGULAR when none does. A
// channel offers the versions up to its default, as GetServerConfig says.
func (s *GServer) channelOffering(v string) containerpb.ReleaseChannel_Channel {
	for _, ch := range []containerpb.ReleaseChannel_Channel{containerpb.ReleaseChannel_STABLE, containerpb.ReleaseChannel_REGULAR, containerpb.ReleaseChannel_RAPID} {
		if def := s.versions[ch]; def != "" && compareVersions(v, def) <= 0 {
			return ch
		}
	}
	return containerpb.ReleaseChannel_REGULAR
}

// GetServerConfig answers, as GKE does for any location, the versions it
// serves: the default (REGULAR's), the valid master and node versions, and
// each release channel's default and valid versions (its own and the
// older ones it still offers), with the image types of the catalog.
func (s *GServer) GetServerConfig(_ context.Context, req *containerpb.GetServerConfigRequest) (*containerpb.ServerConfig, error) {
	p, err := parseParent(req.Name, req.ProjectId, req.Zone)
	if err != nil {
		return nil, err
	}
	if _, _, ok := regionOf(p.location); !ok {
		return nil, status.Errorf(codes.InvalidArgument, "Location %q does not exist or is not a GKE location.", p.location)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	valid := s.validVersions()
	out := &containerpb.ServerConfig{
		DefaultClusterVersion: s.versions[containerpb.ReleaseChannel_REGULAR],
		DefaultImageType:      "COS_CONTAINERD",
		ValidImageTypes:       []string{"COS_CONTAINERD", "UBUNTU_CONTAINERD"},
		ValidMasterVersions:   valid,
		ValidNodeVersions:     slices.Clone(valid),
	}
	for _, ch := range slices.Sorted(maps.Keys(s.versions)) {
		if ch == containerpb.ReleaseChannel_UNSPECIFIED {
			continue
		}
		def := s.versions[ch]
		cfg := &containerpb.ServerConfig_ReleaseChannelConfig{Channel: ch, DefaultVersion: def}
		for _, x := range valid {
			if compareVersions(x, def) <= 0 {
				cfg.ValidVersions = append(cfg.ValidVersions, x)
			}
		}
		out.Channels = append(out.Channels, cfg)
	}
	return out, nil
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
