package gke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/better-compute/kubernetes/emulators/faults"
)

// ComputeServer serves the instance groups of the simulator's node pools
// through the Compute Engine API, as the official REST client
// (cloud.google.com/go/compute/apiv1) calls it: instanceGroupManagers
// aggregatedList and get. Each pool has one managed instance group per
// zone, named as GKE's instanceGroupUrls name it; its targetSize is the
// nodes the zone should have and currentActions.none the nodes it runs,
// the others (a stockout's missing nodes) creating. Calls are
// authenticated and authorized by the simulator's IAM (WithIAM), as its
// gRPC calls are, and are not charged to GKE's request quota: Compute
// Engine has its own.
//
// Its calls are failed, delayed, lost and counted by a faults.Injector of
// their own, as a gRPC emulator's are, by the names of the RPCs of
// Compute Engine's InstanceGroupManagers service (ComputeAggregatedList,
// ComputeGet; Inject takes any RPC of that service): a fault's gRPC code
// is answered as Google's JSON APIs answer it (UNAVAILABLE: HTTP 503 with
// "status": "UNAVAILABLE").
type ComputeServer struct {
	*faults.Injector

	g   *GServer
	log *slog.Logger
	srv *http.Server
	lis net.Listener
}

// Compute Engine methods the server serves, as its Injector names them:
// the RPCs of the InstanceGroupManagers service (computepb).
const (
	ComputeAggregatedList = "AggregatedList"
	ComputeGet            = "Get"
)

// computeMethods is every RPC of Compute Engine's InstanceGroupManagers
// service, as a fault may name them.
var computeMethods = sync.OnceValue(func() []string {
	sd := computepb.File_google_cloud_compute_v1_compute_proto.Services().ByName("InstanceGroupManagers")
	var out []string
	for i := range sd.Methods().Len() {
		out = append(out, string(sd.Methods().Get(i).Name()))
	}
	return out
})

// computeErr is an answer of Compute Engine's own that is not the
// resource: an HTTP status, a reason and a message.
type computeErr struct {
	code        int
	reason, msg string
}

func (e *computeErr) Error() string { return e.msg }

// NewComputeServer starts serving s's instance groups on addr (host:port;
// "127.0.0.1:0" picks a port). Close it when done.
func NewComputeServer(s *Server, addr string) (*ComputeServer, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("gke: compute: listen on %s: %w", addr, err)
	}
	c := &ComputeServer{Injector: &faults.Injector{}, g: s.GServer, log: s.GServer.log, lis: lis}
	c.SetMethods(computeMethods())
	c.srv = &http.Server{Handler: c}
	go func() {
		if err := c.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.log.Warn("Compute emulator stopped serving", "err", err)
		}
	}()
	c.log.Info("Compute emulator listening", "addr", lis.Addr().String())
	return c, nil
}

// Addr is the host:port the server listens on.
func (c *ComputeServer) Addr() string { return c.lis.Addr().String() }

// URL is the server's endpoint, for the client's option.WithEndpoint.
func (c *ComputeServer) URL() string { return "http://" + c.Addr() }

// Close stops the server at once.
func (c *ComputeServer) Close() error { return c.srv.Close() }

// ServeHTTP serves GET /compute/v1/projects/P/aggregated/instanceGroupManagers
// and GET /compute/v1/projects/P/zones/Z/instanceGroupManagers/NAME.
func (c *ComputeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var method, project, zone, name string
	switch {
	case len(parts) == 6 && parts[0] == "compute" && parts[1] == "v1" && parts[2] == "projects" && parts[4] == "aggregated" && parts[5] == "instanceGroupManagers":
		method, project = ComputeAggregatedList, parts[3]
	case len(parts) == 8 && parts[0] == "compute" && parts[1] == "v1" && parts[2] == "projects" && parts[4] == "zones" && parts[6] == "instanceGroupManagers":
		method, project, zone, name = ComputeGet, parts[3], parts[5], parts[7]
	}
	if method == "" || r.Method != http.MethodGet {
		computeError(w, http.StatusNotFound, "notFound", fmt.Sprintf("The requested URL %s was not found on this server.", r.URL.Path))
		return
	}
	resp, err := c.Call(r.Context(), method, r, func(context.Context, any) (any, error) {
		return c.serve(r, method, project, zone, name)
	})
	if err != nil {
		var ce *computeErr
		if errors.As(err, &ce) {
			computeError(w, ce.code, ce.reason, ce.msg)
			return
		}
		st := status.Convert(err)
		computeStatus(w, st.Code(), st.Message())
		return
	}
	writeJSON(w, resp)
}

// serve answers a call of method, authorized, with its resource or a
// *computeErr.
func (c *ComputeServer) serve(r *http.Request, method, project, zone, name string) (any, error) {
	if code, reason, msg := c.g.computeAuth(r, method, project, zone, name); code != 0 {
		return nil, &computeErr{code, reason, msg}
	}
	sel, err := fieldsOf(r)
	if err == nil && sel != nil {
		var md protoreflect.MessageDescriptor = (*computepb.InstanceGroupManager)(nil).ProtoReflect().Descriptor()
		if method == ComputeAggregatedList {
			md = (*computepb.InstanceGroupManagerAggregatedList)(nil).ProtoReflect().Descriptor()
		}
		err = checkFields(sel, md)
	}
	if err != nil {
		return nil, &computeErr{http.StatusBadRequest, "invalidParameter", err.Error()}
	}
	groups := c.g.instanceGroups(project)
	if method == ComputeAggregatedList {
		keep, err := nameFilter(r.URL.Query().Get("filter"))
		if err != nil {
			return nil, &computeErr{http.StatusBadRequest, "invalid", err.Error()}
		}
		groups = slices.DeleteFunc(groups, func(m instanceGroupManager) bool { return !keep(m.Name) })
		return partial(aggregatedList(project, groups), sel), nil
	}
	for _, m := range groups {
		if m.Zone == zoneURL(project, zone) && m.Name == name {
			return partial(m, sel), nil
		}
	}
	return nil, &computeErr{http.StatusNotFound, "notFound", fmt.Sprintf("The resource 'projects/%s/zones/%s/instanceGroupManagers/%s' was not found", project, zone, name)}
}

// nameFilter is the filter of a list, of the one form the simulator
// takes: name eq RE (RE2, matching the whole name, quoted or not), as
// Compute Engine's; "" keeps everything.
func nameFilter(f string) (func(string) bool, error) {
	f = strings.TrimSpace(f)
	if f == "" {
		return func(string) bool { return true }, nil
	}
	f = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(f, "("), ")"))
	v, ok := strings.CutPrefix(f, "name eq ")
	if !ok {
		return nil, fmt.Errorf("Invalid value for field 'filter': '%s'. The simulator takes only 'name eq <regular expression>'.", f)
	}
	v = strings.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		v = v[1 : len(v)-1]
	}
	re, err := regexp.Compile(`^(?:` + v + `)$`)
	if err != nil {
		return nil, fmt.Errorf("Invalid value for field 'filter': '%s': %v", f, err)
	}
	return re.MatchString, nil
}

// computeAuth authenticates and authorizes a Compute call as the gRPC
// calls are (intercept); a zero code lets it through.
func (s *GServer) computeAuth(r *http.Request, method, project, zone, name string) (code int, reason, msg string) {
	if s.iam == nil {
		return 0, "", ""
	}
	tok := ""
	if scheme, t, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "bearer") {
		tok = strings.TrimSpace(t)
	}
	if tok == "" {
		return http.StatusUnauthorized, "required", missingCredential
	}
	who, ok := s.iam.identify(tok)
	if !ok {
		return http.StatusUnauthorized, "authError", invalidCredential
	}
	s.mu.Lock()
	allowed := slices.Contains(s.iam.projects[project], who)
	s.mu.Unlock()
	if allowed {
		return 0, "", ""
	}
	s.log.Info("Refusing a Compute call into a project the caller is not allowed in", "method", method, "project", project, "caller", who)
	if method == ComputeGet {
		return http.StatusForbidden, "forbidden", fmt.Sprintf("Required 'compute.instanceGroupManagers.get' permission for 'projects/%s/zones/%s/instanceGroupManagers/%s'", project, zone, name)
	}
	return http.StatusForbidden, "forbidden", fmt.Sprintf("Required 'compute.instanceGroupManagers.list' permission for 'projects/%s'", project)
}

// instanceGroupManager is the JSON of a Compute Engine managed instance
// group, in the fields the simulator fills, as Compute Engine answered
// them for GKE's groups in the recordings (testdata/replay): the group's
// selfLink and zone in the v1 form of the call, its instance group and
// template in the beta form GKE created them through.
type instanceGroupManager struct {
	Kind                        string         `json:"kind"`
	ID                          string         `json:"id"`
	Name                        string         `json:"name"`
	Zone                        string         `json:"zone"`
	SelfLink                    string         `json:"selfLink"`
	InstanceGroup               string         `json:"instanceGroup"`
	InstanceTemplate            string         `json:"instanceTemplate"`
	BaseInstanceName            string         `json:"baseInstanceName"`
	TargetSize                  int32          `json:"targetSize"`
	TargetStoppedSize           int32          `json:"targetStoppedSize"`
	TargetSuspendedSize         int32          `json:"targetSuspendedSize"`
	TargetSizePolicy            map[string]any `json:"targetSizePolicy"`
	ListManagedInstancesResults string         `json:"listManagedInstancesResults"`
	ServiceAccount              string         `json:"serviceAccount"`
	Versions                    []igmVersion   `json:"versions"`
	CurrentActions              currentActions `json:"currentActions"`
	Status                      igmStatus      `json:"status"`
}

// igmVersion is a version of a group's instances: GKE's groups have one.
type igmVersion struct {
	InstanceTemplate string `json:"instanceTemplate"`
	TargetSize       struct {
		Calculated int32 `json:"calculated"`
	} `json:"targetSize"`
}

// igmStatus is a group's status: stable once it has every instance.
type igmStatus struct {
	IsStable      bool `json:"isStable"`
	VersionTarget struct {
		IsReached bool `json:"isReached"`
	} `json:"versionTarget"`
	AllInstancesConfig struct {
		Effective bool `json:"effective"`
	} `json:"allInstancesConfig"`
}

// currentActions are the instances of a group by what is pending for them.
type currentActions struct {
	None                   int32 `json:"none"`
	Creating               int32 `json:"creating"`
	CreatingWithoutRetries int32 `json:"creatingWithoutRetries"`
	Abandoning             int32 `json:"abandoning"`
	Deleting               int32 `json:"deleting"`
	Recreating             int32 `json:"recreating"`
	Refreshing             int32 `json:"refreshing"`
	Restarting             int32 `json:"restarting"`
	Resuming               int32 `json:"resuming"`
	Starting               int32 `json:"starting"`
	Stopping               int32 `json:"stopping"`
	Suspending             int32 `json:"suspending"`
	Verifying              int32 `json:"verifying"`
}

// instanceGroups returns the instance groups of every node pool of the
// project's clusters, by zone and name. The groups are those GKE reports
// in the pools' instanceGroupUrls (poolOut), so that the two never differ.
func (s *GServer) instanceGroups(project string) []instanceGroupManager {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	var out []instanceGroupManager
	for _, c := range s.clusters {
		if c.key.project != project || c.gone {
			continue
		}
		for _, name := range c.order {
			np := c.pools[name]
			// poolOut's instanceGroupUrls, without copying the pool.
			for _, z := range np.pb.Locations {
				u := instanceGroupURL(c, np, z)
				zone, group, ok := groupOfURL(u)
				if !ok {
					continue
				}
				running := np.nodes[zone]
				target := running
				if np.short != nil {
					if w, ok := np.short.want[zone]; ok {
						target = w
					}
				}
				base := strings.TrimSuffix(group, "-grp")
				region, _, _ := regionOf(zone)
				template := fmt.Sprintf("%sprojects/%s/regions/%s/instanceTemplates/%s", computeBetaBase, project, region, base)
				m := instanceGroupManager{
					Kind:                        "compute#instanceGroupManager",
					ID:                          groupID(u),
					Name:                        group,
					Zone:                        zoneURL(project, zone),
					SelfLink:                    u,
					InstanceGroup:               fmt.Sprintf("%sprojects/%s/zones/%s/instanceGroups/%s", computeBetaBase, project, zone, group),
					InstanceTemplate:            template,
					BaseInstanceName:            base,
					TargetSize:                  target,
					TargetSizePolicy:            map[string]any{"mode": "INDIVIDUAL"},
					ListManagedInstancesResults: "PAGINATED",
					ServiceAccount:              ProjectNumber(project) + "@cloudservices.gserviceaccount.com",
					Versions:                    []igmVersion{{InstanceTemplate: template}},
					CurrentActions:              currentActions{None: running, Creating: max(0, target-running)},
				}
				m.Versions[0].TargetSize.Calculated = target
				m.Status.IsStable = target == running
				m.Status.VersionTarget.IsReached = true
				m.Status.AllInstancesConfig.Effective = true
				out = append(out, m)
			}
		}
	}
	slices.SortFunc(out, func(a, b instanceGroupManager) int {
		if c := strings.Compare(a.Zone, b.Zone); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// groupOfURL returns the zone and name of an instance group manager URL
// (.../projects/P/zones/Z/instanceGroupManagers/NAME).
func groupOfURL(u string) (zone, name string, ok bool) {
	parts := strings.Split(u, "/")
	n := len(parts)
	if n < 4 || parts[n-2] != "instanceGroupManagers" || parts[n-4] != "zones" {
		return "", "", false
	}
	return parts[n-3], parts[n-1], true
}

func zoneURL(project, zone string) string {
	return fmt.Sprintf("%sprojects/%s/zones/%s", computeBase, project, zone)
}

// groupID is a stable numeric ID for a group, as Compute Engine gives
// every resource one.
func groupID(u string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(u))
	return fmt.Sprint(h.Sum64() >> 1)
}

// aggregatedList is the answer of aggregatedList: every scope the
// project sees, each region and zone of the catalog, with its groups, or
// with Compute Engine's warning that it has none (as recorded of an
// aggregated list: code NO_RESULTS_ON_PAGE, the scope as its data, "There
// are no results for scope 'zones/Z' on this page.",
// cloud-custodian/cloud-custodian#4491).
func aggregatedList(project string, groups []instanceGroupManager) map[string]any {
	items := map[string]any{}
	byZone := map[string][]instanceGroupManager{}
	for _, m := range groups {
		z := "zones/" + m.Zone[strings.LastIndex(m.Zone, "/")+1:]
		byZone[z] = append(byZone[z], m)
	}
	for _, scope := range catalogScopes() {
		if ms, ok := byZone[scope]; ok {
			items[scope] = map[string]any{"instanceGroupManagers": ms}
			continue
		}
		items[scope] = map[string]any{"warning": map[string]any{
			"code":    "NO_RESULTS_ON_PAGE",
			"data":    []any{map[string]any{"key": "scope", "value": scope}},
			"message": "There are no results for scope '" + scope + "' on this page.",
		}}
	}
	return map[string]any{
		"kind":     "compute#instanceGroupManagerAggregatedList",
		"id":       "projects/" + project + "/aggregated/instanceGroupManagers",
		"items":    items,
		"selfLink": computeBase + "projects/" + project + "/aggregated/instanceGroupManagers",
	}
}

// catalogScopes is every region and zone of the catalog as an aggregated
// list's scope.
var catalogScopes = sync.OnceValue(func() []string {
	var out []string
	for region, zones := range regions {
		out = append(out, "regions/"+region)
		out = append(out, prefixed("zones/", zones)...)
	}
	return out
})

func prefixed(prefix string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = prefix + s
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(v)
}

// httpStatus is the HTTP status of a gRPC code, as Google's JSON APIs
// map them (google.rpc.Code), with a reason of their errors[].
var httpStatus = map[codes.Code]struct {
	code   int
	reason string
}{
	codes.Canceled:           {499, "cancelled"},
	codes.Unknown:            {500, "backendError"},
	codes.InvalidArgument:    {400, "invalid"},
	codes.DeadlineExceeded:   {504, "deadlineExceeded"},
	codes.NotFound:           {404, "notFound"},
	codes.AlreadyExists:      {409, "alreadyExists"},
	codes.PermissionDenied:   {403, "forbidden"},
	codes.ResourceExhausted:  {429, "rateLimitExceeded"},
	codes.FailedPrecondition: {400, "failedPrecondition"},
	codes.Aborted:            {409, "aborted"},
	codes.OutOfRange:         {400, "outOfRange"},
	codes.Unimplemented:      {501, "notImplemented"},
	codes.Internal:           {500, "backendError"},
	codes.Unavailable:        {503, "backendError"},
	codes.DataLoss:           {500, "dataLoss"},
	codes.Unauthenticated:    {401, "authError"},
}

// computeStatus answers a gRPC status (an injected fault's) as Google's
// JSON APIs do, with its code's name as the error's status.
func computeStatus(w http.ResponseWriter, c codes.Code, msg string) {
	h, ok := httpStatus[c]
	if !ok {
		h.code, h.reason = http.StatusInternalServerError, "backendError"
	}
	writeError(w, h.code, h.reason, msg, faults.CodeName(c))
}

// computeError answers as Google's JSON APIs do.
func computeError(w http.ResponseWriter, code int, reason, msg string) {
	writeError(w, code, reason, msg, "")
}

func writeError(w http.ResponseWriter, code int, reason, msg, st string) {
	e := map[string]any{
		"code":    code,
		"message": msg,
		"errors":  []any{map[string]any{"message": msg, "domain": "global", "reason": reason}},
	}
	if st != "" {
		e["status"] = st
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": e})
}
