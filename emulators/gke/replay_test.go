package gke

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// The replay tests make the calls of traffic recorded against the real GKE
// API, with the official client, and hold the simulator's answers against
// GKE's. The recordings are Config Connector's golden HTTP logs, each
// taken from the commit that recorded it against real GCP (the same
// files were later rewritten against Config Connector's own mock, which is
// no evidence). testdata/replay/*.json hold their GKE exchanges, cut to
// what the simulator models (testdata/replay/extract.py made them; each
// names its repository, commit and path), and are checked thus:
//   - every call is made with the official client over gRPC: the REST
//     method and path say which RPC, the recorded body is its request;
//   - before each GetOperation the clock passes the operation's time, as
//     the recording client waited for the operation to end;
//   - every field of a recorded answer must be in the simulator's (a
//     field GKE left out stands for the zero value a client reads),
//     with ${projectId}, ${projectNumber} and ${uniqueId} the replay's,
//     ${operationID} the answer's own operation name, timestamps any,
//     v1beta1 links read as v1 ones (the client speaks v1), locations
//     and instance groups in any order, and the 8 hex of an instance
//     group name any (GKE's hash is its own), but different in each zone;
//   - a refusal must have GKE's code and message.
//
//
// Compute Engine's instance group manager gets of the same recordings are
// made with the official client (cloud.google.com/go/compute/apiv1) on
// the simulator's ComputeServer, of the group whose name is the recorded
// one but for the 8 hex, which are then read as the recorded ones.
//
// What is not compared (the recordings' other services, the fields the
// simulator does not model) doc.go lists.

// replayFile is one testdata/replay file.
type replayFile struct {
	Source    struct{ Repository, Commit, Path string }
	UniqueID  string           `json:"uniqueId"`
	Exchanges []replayExchange `json:"exchanges"`
}

type replayExchange struct {
	Method   string          `json:"method"`
	Path     string          `json:"path"`
	Code     int             `json:"code"`
	Request  json.RawMessage `json:"request"`
	Response map[string]any  `json:"response"`
}

// replayProject is the project the replays run in.
const replayProject = "kcc-replay"

// replayZones are the default zones GKE chose in a recording where the
// simulator chooses others (doc.go: GKE picked us-central1-a, -c and -f
// for a regional us-central1 cluster, the simulator the region's first
// three): the recorded zone is read as the simulator's, and everything
// else in its links is compared.
var replayZones = map[string][]string{
	"nodepool-confidential": {"us-central1-f", "us-central1-b"},
	"cluster-ipalloc-range": {"us-central1-f", "us-central1-b"},
	"nodepool-tags":         {"us-central1-f", "us-central1-b"},
}

// replayVersions are the channels' versions of GKE when a recording
// depends on them: the swap and containerd recordings created a 1.34
// cluster without a channel, which GKE (offering 1.34.9-gke.1131000 in
// STABLE, 1.34.9-gke.1065000 a month before) enrolled in STABLE.
var replayVersions = map[string]map[containerpb.ReleaseChannel_Channel]string{
	"nodepool-swap":                   aug2026Versions,
	"nodepool-swap-gib":               aug2026Versions,
	"nodepool-swap-ephemeral-ssd-gib": aug2026Versions,
	"nodepool-containerd":             aug2026Versions,
	"cluster-containerd":              aug2026Versions,
}

var aug2026Versions = map[containerpb.ReleaseChannel_Channel]string{
	containerpb.ReleaseChannel_RAPID:    "1.35.2-gke.1000",
	containerpb.ReleaseChannel_REGULAR:  "1.35.1-gke.1000",
	containerpb.ReleaseChannel_STABLE:   "1.34.9-gke.1131000",
	containerpb.ReleaseChannel_EXTENDED: "1.33.9-gke.1000",
}

// replayIgnored are the fields of a recording not compared, each a
// difference doc.go lists: GKE showed maxParallelImagePulls 3 after a
// kubelet configuration update that did not set it (2 before), a default
// of its own the request does not explain.
//
// And GKE's groups took a new instance template (other 8 hex) after an
// update that recreates the nodes (a pool's taints, its kubelet, Linux
// node or containerd configuration), which the simulator does not model.
var replayIgnored = map[string][]string{
	"nodepool-kubeletconfig":   {".kubeletConfig.maxParallelImagePulls", ".instanceTemplate"},
	"nodepool":                 {".instanceTemplate"},
	"nodepool-machinefeatures": {".instanceTemplate"},
	"nodepool-swap":            {".instanceTemplate"},
	"nodepool-containerd":      {".instanceTemplate"},
	// The swap variants' pools turn swap off (a Linux node configuration
	// update).
	"nodepool-swap-gib":               {".instanceTemplate"},
	"nodepool-swap-dedicated-ssd":     {".instanceTemplate"},
	"nodepool-swap-ephemeral-ssd":     {".instanceTemplate"},
	"nodepool-swap-ephemeral-ssd-gib": {".instanceTemplate"},
	"cluster-swap":                    {".instanceTemplate"},
	"cluster-swap-dedicatedssd":       {".instanceTemplate"},
	"cluster-swap-ephemeralssd":       {".instanceTemplate"},
	"cluster-swap-ephemeralssdgib":    {".instanceTemplate"},
	"cluster-swap-gib":                {".instanceTemplate"},
}

func TestReplay(t *testing.T) {
	files, err := filepath.Glob("testdata/replay/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no replay files: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var rf replayFile
			if err := json.Unmarshal(b, &rf); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			t.Logf("replaying %s at %s: %s", rf.Source.Repository, rf.Source.Commit, rf.Source.Path)
			name := strings.TrimSuffix(filepath.Base(f), ".json")
			var opts []Option
			if v := replayVersions[name]; v != nil {
				opts = append(opts, WithVersions(v))
			}
			r := &replayer{env: newEnv(t, opts...), subst: strings.NewReplacer(append(replayZones[name],
				"${projectId}", replayProject,
				"${projectNumber}", ProjectNumber(replayProject),
				"${uniqueId}", rf.UniqueID,
				"https://container.googleapis.com/v1beta1/", apiBase,
			)...), ignored: replayIgnored[name]}
			for i, x := range rf.Exchanges {
				r.exchange(t, fmt.Sprintf("exchange %d: %s %s", i, x.Method, x.Path), x)
			}
		})
	}
}

type replayer struct {
	*env
	// compute is the Compute Engine client, once a Compute call needs it.
	compute *compute.InstanceGroupManagersClient
	subst   *strings.Replacer
	// lastOp is the name of the last operation an answer gave.
	lastOp string
	// ignored are the ends of the paths of fields not compared.
	ignored []string
}

// exchange makes one recorded call and compares the answers.
func (r *replayer) exchange(t *testing.T, what string, x replayExchange) {
	t.Helper()
	if strings.HasPrefix(x.Path, "compute/") {
		r.computeExchange(t, what, x)
		return
	}
	path := r.subst.Replace(x.Path)
	body := []byte(r.subst.Replace(string(x.Request)))
	got, err := r.call(x.Method, path, body)
	if x.Code != http.StatusOK {
		want := x.Response["error"].(map[string]any)
		st, _ := status.FromError(err)
		if err == nil || st.Code().String() != toEnumName(want["status"].(string)) || st.Message() != r.subst.Replace(want["message"].(string)) {
			t.Errorf("%s: got %v; want %s %q", what, err, want["status"], r.subst.Replace(want["message"].(string)))
		}
		return
	}
	if err != nil {
		t.Errorf("%s: %v; want %d", what, err, x.Code)
		return
	}
	b, err := protojson.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var actual map[string]any
	if err := json.Unmarshal(b, &actual); err != nil {
		t.Fatal(err)
	}
	if op, ok := got.(*containerpb.Operation); ok {
		r.lastOp = op.Name
		// A call's answer is PENDING or RUNNING as GKE has started the
		// work or not: recorded both for the same calls (doc.go).
		want, _ := x.Response["status"].(string)
		if x.Method != http.MethodGet && startStatus[want] && startStatus[actual["status"].(string)] {
			actual["status"] = want
		}
	}
	for _, d := range r.diff("", x.Response, actual) {
		t.Errorf("%s: %s", what, d)
	}
}

// startStatus are the statuses of an operation in the answer to the call
// that started it.
var startStatus = map[string]bool{"PENDING": true, "RUNNING": true}

// toEnumName turns GKE's REST status (INVALID_ARGUMENT) into the gRPC
// code's name (InvalidArgument).
func toEnumName(s string) string {
	var b strings.Builder
	for _, w := range strings.Split(strings.ToLower(s), "_") {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

var (
	clusterPath = regexp.MustCompile(`^(projects/[^/]+/locations/[^/]+)/clusters/([^/:]+)(:setResourceLabels|:setMaintenancePolicy)?$`)
	poolPath    = regexp.MustCompile(`^(projects/[^/]+/locations/[^/]+/clusters/[^/]+)/nodePools/([^/:]+)(:setSize)?$`)
	opPath      = regexp.MustCompile(`^(projects/[^/]+/locations/[^/]+)/operations/[^/]+$`)
	listPath    = regexp.MustCompile(`^(projects/[^/]+/locations/[^/]+)/clusters$`)
	poolsPath   = regexp.MustCompile(`^(projects/[^/]+/locations/[^/]+/clusters/[^/]+)/nodePools$`)
)

// call makes the RPC a REST call maps to, with the recorded body.
func (r *replayer) call(method, path string, body []byte) (proto.Message, error) {
	ctx, c := r.ctx, r.client
	read := func(m proto.Message) proto.Message {
		if len(body) > 0 {
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, m); err != nil {
				panic(fmt.Sprintf("request body of %s %s: %v", method, path, err))
			}
		}
		return m
	}
	switch m := opPath.FindStringSubmatch(path); {
	case m != nil && method == http.MethodGet:
		// The recording client polled until the operation was done.
		r.clock.Step(opTime)
		return c.GetOperation(ctx, &containerpb.GetOperationRequest{Name: m[1] + "/operations/" + r.lastOp})
	}
	if m := listPath.FindStringSubmatch(path); m != nil && method == http.MethodPost {
		req := read(&containerpb.CreateClusterRequest{}).(*containerpb.CreateClusterRequest)
		req.Parent = m[1]
		return c.CreateCluster(ctx, req)
	}
	if m := poolsPath.FindStringSubmatch(path); m != nil && method == http.MethodPost {
		req := read(&containerpb.CreateNodePoolRequest{}).(*containerpb.CreateNodePoolRequest)
		req.Parent = m[1]
		return c.CreateNodePool(ctx, req)
	}
	if m := poolPath.FindStringSubmatch(path); m != nil {
		name := m[1] + "/nodePools/" + m[2]
		switch {
		case method == http.MethodPost && m[3] == ":setSize":
			req := read(&containerpb.SetNodePoolSizeRequest{}).(*containerpb.SetNodePoolSizeRequest)
			req.Name = name
			return c.SetNodePoolSize(ctx, req)
		case method == http.MethodGet:
			return c.GetNodePool(ctx, &containerpb.GetNodePoolRequest{Name: name})
		case method == http.MethodPut:
			req := read(&containerpb.UpdateNodePoolRequest{}).(*containerpb.UpdateNodePoolRequest)
			req.Name = name
			return c.UpdateNodePool(ctx, req)
		case method == http.MethodDelete:
			return c.DeleteNodePool(ctx, &containerpb.DeleteNodePoolRequest{Name: name})
		}
	}
	if m := clusterPath.FindStringSubmatch(path); m != nil {
		name := m[1] + "/clusters/" + m[2]
		switch {
		case method == http.MethodPost && m[3] == ":setResourceLabels":
			req := read(&containerpb.SetLabelsRequest{}).(*containerpb.SetLabelsRequest)
			req.Name = name
			// The recording's fingerprint is a placeholder: send the
			// cluster's, as the recording client read it.
			cl, err := c.GetCluster(ctx, &containerpb.GetClusterRequest{Name: name})
			if err != nil {
				return nil, err
			}
			req.LabelFingerprint = cl.LabelFingerprint
			return c.SetLabels(ctx, req)
		case method == http.MethodPost && m[3] == ":setMaintenancePolicy":
			req := read(&containerpb.SetMaintenancePolicyRequest{}).(*containerpb.SetMaintenancePolicyRequest)
			req.Name = name
			return c.SetMaintenancePolicy(ctx, req)
		case method == http.MethodGet:
			return c.GetCluster(ctx, &containerpb.GetClusterRequest{Name: name})
		case method == http.MethodPut:
			req := read(&containerpb.UpdateClusterRequest{}).(*containerpb.UpdateClusterRequest)
			req.Name = name
			return c.UpdateCluster(ctx, req)
		case method == http.MethodDelete:
			return c.DeleteCluster(ctx, &containerpb.DeleteClusterRequest{Name: name})
		}
	}
	panic(fmt.Sprintf("no RPC for %s %s", method, path))
}

var (
	timestampRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$`)
	groupHashRE = regexp.MustCompile(`-[0-9a-f]{8}-grp$`)
)

// diff lists how actual lacks or differs from what GKE answered (want).
func (r *replayer) diff(at string, want, actual any) []string {
	switch w := want.(type) {
	case map[string]any:
		a, _ := actual.(map[string]any)
		var out []string
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range w {
				if !yield(k) {
					return
				}
			}
		}) {
			out = append(out, r.diffField(at+"."+k, k, w[k], a[k])...)
		}
		return out
	case []any:
		a, _ := actual.([]any)
		if len(a) != len(w) {
			return []string{fmt.Sprintf("%s = %v, want %v", at, actual, r.expand(want))}
		}
		var out []string
		for i := range w {
			out = append(out, r.diff(fmt.Sprintf("%s[%d]", at, i), w[i], a[i])...)
		}
		return out
	case string:
		w = r.expand(w).(string)
		a, _ := actual.(string)
		switch {
		case w == "${operationID}" && a != "":
		case timestampRE.MatchString(w) && timestampRE.MatchString(a):
		case w != a:
			return []string{fmt.Sprintf("%s = %q, want %q", at, a, w)}
		}
		return nil
	}
	if isZero(want) && isZero(actual) {
		return nil
	}
	// Numbers: protojson writes int64 as strings, JSON int32 as numbers.
	if fmt.Sprint(want) != fmt.Sprint(actual) {
		return []string{fmt.Sprintf("%s = %v, want %v", at, actual, want)}
	}
	return nil
}

// diffField compares one field, in any order for the fields whose order
// GKE does not keep.
func (r *replayer) diffField(at, key string, want, actual any) []string {
	if isZero(want) && isZero(actual) || slices.ContainsFunc(r.ignored, func(s string) bool { return strings.HasSuffix(at, s) }) {
		return nil
	}
	if key != "locations" && key != "instanceGroupUrls" {
		return r.diff(at, want, actual)
	}
	w, a := strs(r.expand(want)), strs(actual)
	var out []string
	if key == "instanceGroupUrls" {
		hashes := map[string]bool{}
		for i, u := range a {
			hashes[groupHashRE.FindString(u)] = true
			a[i] = groupHashRE.ReplaceAllString(u, "-HASH-grp")
		}
		for i, u := range w {
			w[i] = groupHashRE.ReplaceAllString(u, "-HASH-grp")
		}
		if len(hashes) != len(a) {
			out = append(out, fmt.Sprintf("%s = %v: want a different hash in each zone", at, actual))
		}
	}
	slices.Sort(w)
	slices.Sort(a)
	if !slices.Equal(w, a) {
		out = append(out, fmt.Sprintf("%s = %v, want %v (in any order)", at, a, w))
	}
	return out
}

// expand substitutes the replay's values into a recorded value, and the
// last operation's name for ${operationID} inside a link.
func (r *replayer) expand(v any) any {
	switch v := v.(type) {
	case string:
		s := r.subst.Replace(v)
		if s != "${operationID}" {
			s = strings.ReplaceAll(s, "${operationID}", r.lastOp)
		}
		return s
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = r.expand(v[i])
		}
		return out
	}
	return v
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// isZero reports whether a JSON value is what a client reads when the
// field is left out.
func isZero(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Slice:
		return rv.Len() == 0
	}
	return rv.IsZero()
}

// TestReplayOperationInProgress holds the simulator's refusals of a call
// while an operation runs against GKE's, as public reports quote them
// (FAILED_PRECONDITION, "failedPrecondition" in REST): "Operation
// operation-1529673636160-d1050fce is currently upgrading cluster
// gkecluster-colin-605. Please wait and try again once it is done."
// (banzaicloud/pipeline#623), "... is currently creating a node pool for
// cluster prombench. ..." (prometheus/test-infra#84), "... is currently
// deleting a node pool for cluster default-cluster. ..."
// (hashicorp/terraform-provider-google#10366), "... is currently
// creating cluster ..." for a cluster being created, and for another
// operation "Operation operation-1607703873446-35b09f92 is currently
// operating on cluster cilium-ci-15. ..." (cilium/cilium#14348) of a
// cluster call, "Cluster is running incompatible operation
// operation-1718024305921-.... " (rancher/gke-operator#509) of a call on
// the pool the operation works on, and of a cluster deletion while any
// node pool operation runs (elastic/cloud-on-k8s#9098).
func TestReplayOperationInProgress(t *testing.T) {
	e := newEnv(t)
	create, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{Name: "c1", InitialNodeCount: 1}})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error, want string) {
		t.Helper()
		if status.Code(err) != codes.FailedPrecondition || status.Convert(err).Message() != want {
			t.Errorf("%s during the operation = %v; want FailedPrecondition %q", what, err, want)
		}
	}
	_, err = e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: pool("p1", "e2-medium", 1)})
	check("CreateNodePool", err, "Operation "+create.Name+" is currently creating cluster c1. Please wait and try again once it is done.")
	_, err = e.client.DeleteCluster(e.ctx, &containerpb.DeleteClusterRequest{Name: clusterN})
	check("DeleteCluster", err, "Operation "+create.Name+" is currently creating cluster c1. Please wait and try again once it is done.")
	e.wait(t, create)

	np, err := e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: pool("p1", "e2-medium", 1)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.client.UpdateCluster(e.ctx, &containerpb.UpdateClusterRequest{Name: clusterN, Update: &containerpb.ClusterUpdate{DesiredMasterVersion: "latest"}})
	check("UpdateCluster", err, "Operation "+np.Name+" is currently creating a node pool for cluster c1. Please wait and try again once it is done.")
	_, err = e.client.SetNodePoolSize(e.ctx, &containerpb.SetNodePoolSizeRequest{Name: clusterN + "/nodePools/p1", NodeCount: 2})
	check("SetNodePoolSize", err, "Operation "+np.Name+" is currently creating a node pool for cluster c1. Please wait and try again once it is done.")
	e.wait(t, np)

	resize, err := e.client.SetNodePoolSize(e.ctx, &containerpb.SetNodePoolSizeRequest{Name: clusterN + "/nodePools/p1", NodeCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.client.DeleteNodePool(e.ctx, &containerpb.DeleteNodePoolRequest{Name: clusterN + "/nodePools/p1"})
	check("DeleteNodePool", err, "Cluster is running incompatible operation "+resize.Name+".")
	_, err = e.client.DeleteCluster(e.ctx, &containerpb.DeleteClusterRequest{Name: clusterN})
	check("DeleteCluster", err, "Cluster is running incompatible operation "+resize.Name+".")
	_, err = e.client.UpdateCluster(e.ctx, &containerpb.UpdateClusterRequest{Name: clusterN, Update: &containerpb.ClusterUpdate{DesiredMasterVersion: "latest"}})
	check("UpdateCluster", err, "Operation "+resize.Name+" is currently operating on cluster c1. Please wait and try again once it is done.")
	e.wait(t, resize)

	del, err := e.client.DeleteNodePool(e.ctx, &containerpb.DeleteNodePoolRequest{Name: clusterN + "/nodePools/p1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.client.UpdateCluster(e.ctx, &containerpb.UpdateClusterRequest{Name: clusterN, Update: &containerpb.ClusterUpdate{DesiredMasterVersion: "latest"}})
	check("UpdateCluster", err, "Operation "+del.Name+" is currently deleting a node pool for cluster c1. Please wait and try again once it is done.")
	_, err = e.client.DeleteCluster(e.ctx, &containerpb.DeleteClusterRequest{Name: clusterN})
	check("DeleteCluster", err, "Cluster is running incompatible operation "+del.Name+".")
}

var igmPath = regexp.MustCompile(`^compute/v1/projects/([^/]+)/zones/([^/]+)/instanceGroupManagers/([^/]+)$`)

// computeExchange makes one recorded instanceGroupManagers.get with the
// official Compute Engine client and compares the answers.
func (r *replayer) computeExchange(t *testing.T, what string, x replayExchange) {
	t.Helper()
	if r.compute == nil {
		_, r.compute = computeClient(t, r.srv)
	}
	m := igmPath.FindStringSubmatch(r.subst.Replace(x.Path))
	if m == nil || x.Method != http.MethodGet {
		t.Fatalf("%s: not an instance group manager get", what)
	}
	project, zone, recorded := m[1], m[2], m[3]
	name := ""
	for _, g := range r.srv.GServer.instanceGroups(project) {
		if strings.HasSuffix(g.Zone, "/zones/"+zone) && groupHashRE.ReplaceAllString(g.Name, "-HASH-grp") == groupHashRE.ReplaceAllString(recorded, "-HASH-grp") {
			name = g.Name
		}
	}
	if name == "" {
		t.Errorf("%s: the simulator has no group %s in %s", what, recorded, zone)
		return
	}
	got, err := r.compute.Get(r.ctx, &computepb.GetInstanceGroupManagerRequest{Project: project, Zone: zone, InstanceGroupManager: name})
	if err != nil {
		t.Errorf("%s: %v; want %d", what, err, x.Code)
		return
	}
	b, err := protojson.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	// The simulator's 8 hex, wherever the name is (links, the template,
	// the instances' base name), read as GKE's.
	simHex, recHex := strings.TrimSuffix(groupHashRE.FindString(name), "-grp"), strings.TrimSuffix(groupHashRE.FindString(recorded), "-grp")
	if simHex != "" && recHex != "" {
		b = []byte(strings.ReplaceAll(string(b), simHex, recHex))
	}
	var actual map[string]any
	if err := json.Unmarshal(b, &actual); err != nil {
		t.Fatal(err)
	}
	for _, d := range r.diff("", x.Response, actual) {
		t.Errorf("%s: %s", what, d)
	}
}
