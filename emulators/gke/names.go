package gke

import (
	"fmt"
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
