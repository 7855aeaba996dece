package gke

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// clusterKey names one cluster: projects/P/locations/L/clusters/C.
type clusterKey struct{ project, location, cluster string }

func (k clusterKey) String() string {
	return fmt.Sprintf("projects/%s/locations/%s/clusters/%s", k.project, k.location, k.cluster)
}

// poolKey names one node pool of a cluster.
type poolKey struct {
	clusterKey
	pool string
}

func (k poolKey) String() string {
	return k.clusterKey.String() + "/nodePools/" + k.pool
}

// parentKey names a project and location: projects/P/locations/L, where L
// may be "-" for every location.
type parentKey struct{ project, location string }

func (k parentKey) String() string {
	return fmt.Sprintf("projects/%s/locations/%s", k.project, k.location)
}

// splitName matches name against the segment pattern (literals and "*"
// wildcards) and returns the wildcard values, or false.
func splitName(name string, pattern ...string) ([]string, bool) {
	parts := strings.Split(name, "/")
	if len(parts) != len(pattern) {
		return nil, false
	}
	var vals []string
	for i, p := range pattern {
		switch {
		case p == "*" && parts[i] != "":
			vals = append(vals, parts[i])
		case p == "*" || p != parts[i]:
			return nil, false
		}
	}
	return vals, true
}

// legacy resolves the deprecated project_id/zone/... fields, all of which
// are then required, in the order given as (field name, value) pairs.
func legacy(pairs ...string) ([]string, error) {
	var vals []string
	for i := 0; i < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return nil, status.Errorf(codes.InvalidArgument, "Required %q field not set: set name (or parent) or the deprecated %s.", pairs[i], pairs[i])
		}
		vals = append(vals, pairs[i+1])
	}
	return vals, nil
}

func parseParent(parent, project, zone string) (parentKey, error) {
	if parent != "" {
		v, ok := splitName(parent, "projects", "*", "locations", "*")
		if !ok {
			return parentKey{}, status.Errorf(codes.InvalidArgument, "Invalid parent %q: want projects/{project}/locations/{location}.", parent)
		}
		return parentKey{v[0], v[1]}, nil
	}
	v, err := legacy("project_id", project, "zone", zone)
	if err != nil {
		return parentKey{}, err
	}
	return parentKey{v[0], v[1]}, nil
}

func parseCluster(name, project, zone, cluster string) (clusterKey, error) {
	if name != "" {
		v, ok := splitName(name, "projects", "*", "locations", "*", "clusters", "*")
		if !ok {
			return clusterKey{}, status.Errorf(codes.InvalidArgument, "Invalid cluster name %q: want projects/{project}/locations/{location}/clusters/{cluster}.", name)
		}
		return clusterKey{v[0], v[1], v[2]}, nil
	}
	v, err := legacy("project_id", project, "zone", zone, "cluster_id", cluster)
	if err != nil {
		return clusterKey{}, err
	}
	return clusterKey{v[0], v[1], v[2]}, nil
}

func parsePool(name, project, zone, cluster, pool string) (poolKey, error) {
	if name != "" {
		v, ok := splitName(name, "projects", "*", "locations", "*", "clusters", "*", "nodePools", "*")
		if !ok {
			return poolKey{}, status.Errorf(codes.InvalidArgument, "Invalid node pool name %q: want projects/{project}/locations/{location}/clusters/{cluster}/nodePools/{nodePool}.", name)
		}
		return poolKey{clusterKey{v[0], v[1], v[2]}, v[3]}, nil
	}
	v, err := legacy("project_id", project, "zone", zone, "cluster_id", cluster, "node_pool_id", pool)
	if err != nil {
		return poolKey{}, err
	}
	return poolKey{clusterKey{v[0], v[1], v[2]}, v[3]}, nil
}

// parseOperation returns the project, location and operation ID.
func parseOperation(name, project, zone, opID string) (parentKey, string, error) {
	if name != "" {
		v, ok := splitName(name, "projects", "*", "locations", "*", "operations", "*")
		if !ok {
			return parentKey{}, "", status.Errorf(codes.InvalidArgument, "Invalid operation name %q: want projects/{project}/locations/{location}/operations/{operation}.", name)
		}
		return parentKey{v[0], v[1]}, v[2], nil
	}
	v, err := legacy("project_id", project, "zone", zone, "operation_id", opID)
	if err != nil {
		return parentKey{}, "", err
	}
	return parentKey{v[0], v[1]}, v[2], nil
}

// parseNameArg parses a cluster or node pool name given to a Server helper.
func parseNameArg(name string) (clusterKey, string, error) {
	if v, ok := splitName(name, "projects", "*", "locations", "*", "clusters", "*"); ok {
		return clusterKey{v[0], v[1], v[2]}, "", nil
	}
	if v, ok := splitName(name, "projects", "*", "locations", "*", "clusters", "*", "nodePools", "*"); ok {
		return clusterKey{v[0], v[1], v[2]}, v[3], nil
	}
	return clusterKey{}, "", fmt.Errorf("gke: bad name %q: want projects/P/locations/L/clusters/C[/nodePools/NP]", name)
}

// scope is how GKE writes a location in the paths it answers with:
// projects/P/zones/Z for a zone, projects/P/locations/R for a region, as
// the resources of the older zonal API were and still are.
func scope(project, location string) string {
	if _, isZone, _ := regionOf(location); isZone {
		return "projects/" + project + "/zones/" + location
	}
	return "projects/" + project + "/locations/" + location
}

// path is a cluster's path as GKE writes it in selfLinks and messages.
func (k clusterKey) path() string { return scope(k.project, k.location) + "/clusters/" + k.cluster }

// ProjectNumber is the project number the simulator gives a project ID:
// GKE writes operations' selfLink and targetLink with the project's
// number, which a project ID does not tell, so the simulator makes up a
// stable twelve-digit one. A project given by number keeps it.
func ProjectNumber(project string) string {
	if _, err := strconv.ParseUint(project, 10, 64); err == nil {
		return project
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(project))
	return strconv.FormatUint(100000000000+h.Sum64()%900000000000, 10)
}

// instanceGroupName is the name of the Compute Engine instance group
// manager of a pool in one zone, as GKE names it:
// gke-<cluster>-<pool>-<8 hex>-grp, with the 8 hex different in each zone
// and the cluster and pool names cut so that together they take at most
// 32 characters (each keeps at least 16 when both are long; a cut may
// leave a trailing hyphen, as GKE's does:
// gke-cluster-sample-d-nodepool-sample--de290dea-grp). The 8 hex are
// also those of the zone's Node names.
func instanceGroupName(clusterName, pool, clusterID, poolUID, zone string) string {
	c, p := cutNames(clusterName, pool, 32)
	return "gke-" + c + "-" + p + "-" + groupHash(clusterID, poolUID, zone) + "-grp"
}

// groupHash names a pool's instance group in a zone: a hash of the
// cluster, the pool and the zone, stable for the pool's life.
func groupHash(clusterID, poolUID, zone string) string {
	sum := sha256.Sum256([]byte(clusterID + "/" + poolUID + "/" + zone))
	return hex.EncodeToString(sum[:])[:8]
}

// cutNames shortens a and b so that together they have at most n
// characters: the shorter one is kept whole when it fits in half, and the
// longer one takes the rest.
func cutNames(a, b string, n int) (string, string) {
	if len(a)+len(b) <= n {
		return a, b
	}
	half := n / 2
	switch {
	case len(a) <= half:
		return a, b[:n-len(a)]
	case len(b) <= half:
		return a[:n-len(b)], b
	}
	return a[:half], b[:n-half]
}
