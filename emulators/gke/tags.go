package gke

import (
	"maps"
	"slices"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// GKE puts a node configuration's resource_manager_tags on the nodes'
// VMs as its service agent, which must be able to read each tag: a tag
// that does not exist is refused as one the agent may not read, as
// recorded of real GKE (Config Connector, containernodepool-resourcemanagertags,
// tagKeys/123 of a project without it): PERMISSION_DENIED "Permission
// denied: for service-N@container-engine-robot.iam.gserviceaccount.com on
// TagKey "tagKeys/123" (or it may not exist).". The simulator has no
// Resource Manager, so the tags a test uses are made to exist with
// Server.AddTags.

// AddTags makes TagKeys and their TagValues exist, as Resource Manager
// would hold them, for the resource_manager_tags of node pools: each key
// (tagKeys/ID, or a namespaced name such as my-project/env) with the
// values it has (tagValues/ID, or short names). Until then no tag
// exists, and a pool asking for one is refused as GKE refuses it. Tags
// are not saved by Snapshot.
func (s *Server) AddTags(tags map[string][]string) {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tags == nil {
		g.tags = map[string]map[string]bool{}
	}
	for k, vs := range tags {
		if g.tags[k] == nil {
			g.tags[k] = map[string]bool{}
		}
		for _, v := range vs {
			g.tags[k][v] = true
		}
	}
}

// checkTags refuses tags that do not exist, in the key order (GKE's order
// of checking several is not recorded). The TagValue form of the refusal
// is inferred from the TagKey one. Called with s.mu held.
func (s *GServer) checkTags(project string, tags *containerpb.ResourceManagerTags) error {
	m := tags.GetTags()
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kind, name := "TagKey", k
		switch {
		case s.tags[k] == nil:
		case !s.tags[k][m[k]]:
			kind, name = "TagValue", m[k]
		default:
			continue
		}
		return status.Errorf(codes.PermissionDenied, "Permission denied: for service-%s@container-engine-robot.iam.gserviceaccount.com on %s %q (or it may not exist).", ProjectNumber(project), kind, name)
	}
	return nil
}
