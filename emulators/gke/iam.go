package gke

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// IAM is the simulator's per-project authorization (WithIAM): who may call
// into which project.
type IAM struct {
	// Projects lists, for each project, the identities (service account
	// emails) allowed to call into it: with every permission of the API,
	// as roles/container.admin would give. A project not listed allows no
	// one.
	Projects map[string][]string
	// Identify returns the identity an OAuth access token stands for, and
	// false when the token is unknown or expired: the IAM Credentials
	// emulator's Server.Identify, which knows the tokens it issued.
	Identify func(accessToken string) (identity string, ok bool)
}

// WithIAM makes the simulator authenticate and authorize every call as
// GKE does: the caller is the identity of the request's "authorization:
// Bearer" token (iam.Identify), and a call into a project the caller is
// not allowed in (iam.Projects) is PERMISSION_DENIED with the permission
// the method needs. Without it, nothing is checked.
func WithIAM(iam IAM) Option {
	return func(c *config) {
		p := map[string][]string{}
		for project, ids := range iam.Projects {
			p[project] = slices.Clone(ids)
		}
		c.iam = &iamPolicy{projects: p, identify: iam.Identify}
	}
}

// iamPolicy is WithIAM's state, guarded by the server's lock.
type iamPolicy struct {
	projects map[string][]string
	identify func(string) (string, bool)
}

// SetProjectIAM replaces the identities allowed to call into project (none:
// nobody), as a change of the project's IAM policy would. It needs
// WithIAM.
func (s *Server) SetProjectIAM(project string, identities ...string) error {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.iam == nil {
		return fmt.Errorf("gke: SetProjectIAM(%q): the simulator runs without WithIAM", project)
	}
	g.iam.projects[project] = slices.Clone(identities)
	return nil
}

// Messages of Google's front end for calls it cannot authenticate.
const (
	missingCredential = "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
	invalidCredential = "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
)

// permissions is the permission each RPC needs, and on what: the project,
// the cluster or the operation (GKE's API permissions table).
var permissions = map[string]struct{ perm, on string }{
	"CreateCluster":          {"container.clusters.create", "project"},
	"ListClusters":           {"container.clusters.list", "project"},
	"GetCluster":             {"container.clusters.get", "cluster"},
	"DeleteCluster":          {"container.clusters.delete", "cluster"},
	"CreateNodePool":         {"container.clusters.update", "cluster"},
	"DeleteNodePool":         {"container.clusters.update", "cluster"},
	"SetNodePoolSize":        {"container.clusters.update", "cluster"},
	"SetNodePoolAutoscaling": {"container.clusters.update", "cluster"},
	"UpdateNodePool":         {"container.clusters.update", "cluster"},
	"GetNodePool":            {"container.clusters.get", "cluster"},
	"ListNodePools":          {"container.clusters.get", "cluster"},
	"GetOperation":           {"container.operations.get", "operation"},
	"GetServerConfig":        {"container.clusters.list", "project"},
	"SetMaintenancePolicy":   {"container.clusters.update", "cluster"},
	"ListOperations":         {"container.operations.list", "project"},
}

// authenticate returns the identity of a call's bearer token; "" when
// the simulator runs without WithIAM. It reads no state of the simulator,
// so it needs no lock.
func (s *GServer) authenticate(ctx context.Context) (string, error) {
	if s.iam == nil {
		return "", nil
	}
	tok := bearerToken(ctx)
	if tok == "" {
		return "", status.Error(codes.Unauthenticated, missingCredential)
	}
	who, ok := s.iam.identify(tok)
	if !ok {
		return "", status.Error(codes.Unauthenticated, invalidCredential)
	}
	return who, nil
}

// authorize checks that who may make a call of rpc, against the policy.
// Must be called with the lock held.
func (s *GServer) authorize(who, rpc string, req any) error {
	if s.iam == nil {
		return nil
	}
	project := projectOf(req)
	if slices.Contains(s.iam.projects[project], who) {
		return nil
	}
	p, ok := permissions[rpc]
	if !ok {
		p.perm, p.on = "container.clusters.update", "cluster"
	}
	s.log.Info("Refusing a call into a project the caller is not allowed in", "rpc", rpc, "project", project, "caller", who)
	return status.Errorf(codes.PermissionDenied, "Required %q permission(s) for %q.", p.perm, iamResource(req, p.on, project))
}

// iamResource names what a permission is checked on, as GKE's refusal
// does: projects/P, the cluster, or the operation.
func iamResource(req any, on, project string) string {
	get := func(method string) string {
		switch method {
		case "name":
			if r, ok := req.(interface{ GetName() string }); ok {
				return r.GetName()
			}
		case "parent":
			if r, ok := req.(interface{ GetParent() string }); ok {
				return r.GetParent()
			}
		case "zone":
			if r, ok := req.(interface{ GetZone() string }); ok {
				return r.GetZone()
			}
		case "cluster":
			if r, ok := req.(interface{ GetClusterId() string }); ok {
				return r.GetClusterId()
			}
		case "operation":
			if r, ok := req.(interface{ GetOperationId() string }); ok {
				return r.GetOperationId()
			}
		}
		return ""
	}
	switch on {
	case "cluster":
		name := get("name")
		if name == "" {
			name = get("parent") // CreateNodePool's parent is its cluster
		}
		if name == "" {
			name = fmt.Sprintf("projects/%s/zones/%s/clusters/%s", project, get("zone"), get("cluster"))
		}
		name, _, _ = strings.Cut(name, "/nodePools/")
		return name
	case "operation":
		if name := get("name"); name != "" {
			return name
		}
		return fmt.Sprintf("projects/%s/zones/%s/operations/%s", project, get("zone"), get("operation"))
	}
	return "projects/" + project
}

// bearerToken returns the access token of a call's "authorization:
// Bearer" header, or "" when it has none.
func bearerToken(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if scheme, tok, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "bearer") && tok != "" {
			return strings.TrimSpace(tok)
		}
	}
	return ""
}
