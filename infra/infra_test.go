// Package infra holds the Terraform of the production deployment. Its
// tests read that Terraform with HCL and fail when it and the code drift
// apart: a function without its service or a variable its configuration
// requires, an event type without its topic, a query without its index, a
// service account with a role its code does not need or without one it
// does, an alert on a log line the code no longer writes. They also build
// the image's binary as the Dockerfile does.
package infra

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/better-compute/kubernetes/functions/cloudrun"
	"github.com/better-compute/kubernetes/shared/clusters"
	"github.com/better-compute/kubernetes/shared/outbox"
)

// The values of the variables without defaults, and two platform
// projects: this one and another, so that every for_each over them has
// something to expand.
const (
	project      = "bc-prod"
	platform     = "bc-platform-1"
	image        = "europe-west1-docker.pkg.dev/bc-prod/functions/server@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	imageRepoID  = "functions"
	serviceAgent = "serviceAccount:service-%s@%s.iam.gserviceaccount.com"
)

var (
	moduleOnce sync.Once
	theModule  *module
)

// tf returns the evaluated Terraform of this directory.
func tf(t *testing.T) *module {
	t.Helper()
	moduleOnce.Do(func() {
		theModule = loadModule(t, ".", map[string]cty.Value{
			"project":           cty.StringVal(project),
			"image":             cty.StringVal(image),
			"domain":            cty.StringVal("api.example.com"),
			"auth_issuer_url":   cty.StringVal("https://issuer.example.com"),
			"auth_audience":     cty.StringVal("https://api.example.com"),
			"platform_projects": cty.ListVal([]cty.Value{cty.StringVal(project), cty.StringVal(platform)}),
		})
	})
	if theModule == nil {
		t.FailNow()
	}
	return theModule
}

// service is a Cloud Run service of the Terraform.
type service struct {
	inst    *instance
	name    string               // the service's name
	account string               // its runtime identity (template.service_account)
	image   string               // its containers' image
	env     map[string]cty.Value // its containers' environment
}

// services returns the Cloud Run services by the function they serve
// (their FUNCTION_TARGET).
func services(t *testing.T, m *module) map[string]service {
	t.Helper()
	out := map[string]service{}
	for _, i := range m.ofType("google_cloud_run_v2_service") {
		s := service{inst: i, name: i.str("name"), env: map[string]cty.Value{}}
		tmpl, err := m.nested(i, "template")
		if err != nil || len(tmpl) != 1 {
			t.Fatalf("%s: template: %v", i.addr(), err)
		}
		s.account = str(tmpl[0]["service_account"])
		containers, err := m.nested(i, "template", "containers")
		if err != nil || len(containers) != 1 {
			t.Fatalf("%s: want one container: %v", i.addr(), err)
		}
		s.image = str(containers[0]["image"])
		env, err := m.nested(i, "template", "containers", "env")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range env {
			name := str(e["name"])
			if _, dup := s.env[name]; dup {
				t.Errorf("%s sets %s twice", i.addr(), name)
			}
			s.env[name] = e["value"]
		}
		target := str(s.env["FUNCTION_TARGET"])
		if prev, dup := out[target]; dup {
			t.Errorf("%s and %s both serve FUNCTION_TARGET %q", prev.inst.addr(), i.addr(), target)
		}
		out[target] = s
	}
	return out
}

// TestEveryFunctionHasItsService checks that each registered function has
// one Cloud Run service with its FUNCTION_TARGET, the image, every
// variable its configuration requires and none it does not read; that no
// service serves a function that does not exist; and that the HTTPS entry
// routes each API method's path to its own service.
func TestEveryFunctionHasItsService(t *testing.T) {
	m := tf(t)
	svcs := services(t, m)
	registered := map[string]bool{}
	for _, f := range cloudrun.Functions() {
		registered[f.Name] = true
		s, ok := svcs[f.Name]
		if !ok {
			t.Errorf("function %s has no Cloud Run service with FUNCTION_TARGET=%s", f.Name, f.Name)
			continue
		}
		read, required := cloudrun.Variables(f.Name)
		for _, name := range required {
			if _, ok := s.env[name]; !ok {
				t.Errorf("%s (%s) does not set %s, which LoadConfig requires", s.inst.addr(), f.Name, name)
			}
		}
		for name := range s.env {
			if !slices.Contains(read, name) {
				t.Errorf("%s (%s) sets %s, which LoadConfig does not read", s.inst.addr(), f.Name, name)
			}
		}
		if s.image != image {
			t.Errorf("%s runs image %q, want var.image", s.inst.addr(), s.image)
		}
		if s.account == "" {
			t.Errorf("%s has no service account: it would run as the Compute Engine default account", s.inst.addr())
		}
	}
	for target, s := range svcs {
		if !registered[target] {
			t.Errorf("%s serves FUNCTION_TARGET %q, which is no registered function", s.inst.addr(), target)
		}
	}

	// The internal functions' URLs, as the others' environment names them.
	reconcile, watchdog := svcs[cloudrun.ReconcileFunction], svcs[cloudrun.WatchdogFunction]
	reconcileURL := str(reconcile.env["RECONCILE_AUDIENCE"])
	if !strings.Contains(reconcileURL, reconcile.name) {
		t.Errorf("the reconcile service's RECONCILE_AUDIENCE %q is not its own URL", reconcileURL)
	}
	if u := str(watchdog.env["RECONCILE_AUDIENCE"]); !strings.Contains(u, watchdog.name) {
		t.Errorf("the watchdog service's RECONCILE_AUDIENCE %q is not its own URL", u)
	}
	for target, s := range svcs {
		if got := str(s.env["RECONCILE_URL"]); got != reconcileURL {
			t.Errorf("%s (%s) has RECONCILE_URL %q, want the reconcile service's %q", s.inst.addr(), target, got, reconcileURL)
		}
	}

	// The HTTPS entry: each API method's path goes to its function's
	// service (path rule → backend service → serverless NEG → service).
	routes := map[string]string{} // path → Cloud Run service name
	for _, um := range m.ofType("google_compute_url_map") {
		rules, err := m.nested(um, "path_matcher", "path_rule")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			backend := instanceByRef(m, "google_compute_backend_service", "id", str(r["service"]))
			if backend == nil {
				t.Errorf("%s: path rule %v names no backend service", um.addr(), stringsOf(r["paths"]))
				continue
			}
			groups, err := m.nested(backend, "backend")
			if err != nil || len(groups) != 1 {
				t.Fatalf("%s: want one backend: %v", backend.addr(), err)
			}
			neg := instanceByRef(m, "google_compute_region_network_endpoint_group", "id", str(groups[0]["group"]))
			if neg == nil {
				t.Errorf("%s: its backend is no serverless NEG", backend.addr())
				continue
			}
			cr, err := m.nested(neg, "cloud_run")
			if err != nil || len(cr) != 1 {
				t.Fatalf("%s: cloud_run: %v", neg.addr(), err)
			}
			for _, p := range stringsOf(r["paths"]) {
				routes[p] = str(cr[0]["service"])
			}
		}
	}
	for _, f := range cloudrun.Functions() {
		if !strings.HasPrefix(f.Path, "/api/") {
			continue
		}
		if got, want := routes[f.Path], svcs[f.Name].name; got != want {
			t.Errorf("the HTTPS entry sends %s to service %q, want %q (%s)", f.Path, got, want, f.Name)
		}
		delete(routes, f.Path)
	}
	for p, s := range routes {
		t.Errorf("the HTTPS entry routes %s (to %s), which is no API method's path", p, s)
	}
}

// instanceByRef returns the instance of type typ whose attribute attr is
// ref: how one resource names another.
func instanceByRef(m *module, typ, attr, ref string) *instance {
	if ref == "" {
		return nil
	}
	return m.instanceWith(typ, attr, ref)
}

// TestEventTopics checks that each event type has its topic, each topic
// consumed by a CloudEvent function a subscription pushing to it, and
// that no other topic exists.
func TestEventTopics(t *testing.T) {
	m := tf(t)
	topics := map[string]*instance{}
	for _, i := range m.ofType("google_pubsub_topic") {
		topics[i.str("name")] = i
	}
	want := map[string]bool{}
	for _, typ := range outbox.Types {
		want[typ] = true
		if topics[typ] == nil {
			t.Errorf("event type %s has no topic", typ)
		}
	}
	svcs := services(t, m)
	for _, f := range cloudrun.Functions() {
		for _, topic := range f.Topics {
			want[topic] = true
			var pushed bool
			for _, sub := range m.ofType("google_pubsub_subscription") {
				ref := sub.str("topic")
				if ref != topic && !strings.HasSuffix(ref, "/topics/"+topic) && (topics[topic] == nil || (ref != topics[topic].str("id") && ref != topics[topic].str("name"))) {
					continue
				}
				push, err := m.nested(sub, "push_config")
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range push {
					if strings.Contains(str(p["push_endpoint"]), svcs[f.Name].name) {
						pushed = true
					}
				}
			}
			if !pushed {
				t.Errorf("function %s consumes topic %s, but no subscription of it pushes to its service", f.Name, topic)
			}
		}
	}
	for name, i := range topics {
		if !want[name] {
			t.Errorf("%s: topic %q is no event type and no function consumes it", i.addr(), name)
		}
	}
}

// gkePermissions maps each call of shared/clusters.GKE to the permission
// it needs. A call added to the interface fails the test until it is
// mapped here and granted by the reconciler's role.
var gkePermissions = map[string]string{
	"GetCluster":             "container.clusters.get",
	"ListClusters":           "container.clusters.list",
	"CreateCluster":          "container.clusters.create",
	"DeleteCluster":          "container.clusters.delete",
	"CreateNodePool":         "container.clusters.update",
	"DeleteNodePool":         "container.clusters.update",
	"SetNodePoolSize":        "container.clusters.update",
	"SetNodePoolAutoscaling": "container.clusters.update",
	"GetOperation":           "container.operations.get",
	"ListOperations":         "container.operations.list",
}

type grant struct{ member, role, target string }

func (g grant) String() string { return g.role + " on " + g.target }

// TestServiceAccountRoles checks that every identity has exactly the
// roles its code's calls need, each on the narrowest resource.
func TestServiceAccountRoles(t *testing.T) {
	m := tf(t)
	svcs := services(t, m)

	var got []grant
	targetAttr := map[string]string{
		"google_project_iam_member":                      "project",
		"google_pubsub_topic_iam_member":                 "topic",
		"google_cloud_tasks_queue_iam_member":            "queue",
		"google_service_account_iam_member":              "serviceAccount",
		"google_cloud_run_v2_service_iam_member":         "run",
		"google_artifact_registry_repository_iam_member": "repository",
	}
	targetArg := map[string]string{"project": "project", "topic": "topic", "queue": "name", "serviceAccount": "service_account_id", "run": "name", "repository": "repository"}
	for _, r := range m.resources {
		if !strings.HasSuffix(r.typ, "_iam_member") && !strings.HasSuffix(r.typ, "_iam_binding") && !strings.HasSuffix(r.typ, "_iam_policy") {
			continue
		}
		kind, ok := targetAttr[r.typ]
		if !ok {
			t.Errorf("%s: the test does not know %s: grant roles with one of %v", r.addr, r.typ, slices.Sorted(mapKeys(targetAttr)))
			continue
		}
		for _, i := range r.instances {
			g := grant{member: i.str("member"), role: i.str("role"), target: kind + " " + i.str(targetArg[kind])}
			if g.member == "" || g.role == "" || strings.HasSuffix(g.target, " ") {
				t.Errorf("%s: member, role or %s cannot be evaluated", i.addr(), targetArg[kind])
			}
			got = append(got, g)
		}
	}

	sa := func(email string) string { return "serviceAccount:" + email }
	accountName := func(email string) string {
		i := m.instanceWith("google_service_account", "email", email)
		if i == nil {
			t.Fatalf("no google_service_account has email %q", email)
		}
		return "serviceAccount " + i.str("name")
	}
	platforms := stringsOf(m.vars["platform_projects"])
	reconcile := svcs[cloudrun.ReconcileFunction]
	watchdog := svcs[cloudrun.WatchdogFunction]
	tasksAccount := str(reconcile.env["TASKS_SERVICE_ACCOUNT"])
	nodesAccount := str(reconcile.env["NODE_SERVICE_ACCOUNT"])
	queue := m.instanceWith("google_cloud_tasks_queue", "id", str(reconcile.env["TASKS_QUEUE"]))
	if queue == nil {
		t.Fatalf("TASKS_QUEUE %q is no queue of the Terraform", str(reconcile.env["TASKS_QUEUE"]))
	}

	var want []grant
	for _, f := range cloudrun.Functions() {
		id := sa(svcs[f.Name].account)
		// Every function builds the same core (functions/cloudrun):
		// Firestore (no finer resource than the project for data
		// access), the outbox relay, whose publishes and whose drain
		// may carry any event type, and the reconcile queue, whose
		// tasks carry the tasks identity's OIDC tokens (actAs).
		want = append(want, grant{id, "roles/datastore.user", "project " + project})
		for _, typ := range outbox.Types {
			want = append(want, grant{id, "roles/pubsub.publisher", "topic " + typ})
		}
		want = append(want,
			grant{id, "roles/cloudtasks.enqueuer", "queue " + queue.str("name")},
			grant{id, "roles/iam.serviceAccountUser", accountName(tasksAccount)})
		// On Cloud Run every function exports its metrics and spans
		// (cloudrun.Config.Telemetry, shared/telemetry).
		want = append(want,
			grant{id, "roles/monitoring.metricWriter", "project " + project},
			grant{id, "roles/cloudtrace.agent", "project " + project})
		if strings.HasPrefix(f.Path, "/api/") {
			// Tenants' tokens are checked by the function itself.
			want = append(want, grant{"allUsers", "roles/run.invoker", "run " + svcs[f.Name].name})
		}
	}
	// The reconciler's GKE calls, in every platform project, and actAs on
	// the nodes' account that it sets on what it creates.
	var perms []string
	gke := reflect.TypeFor[clusters.GKE]()
	for k := range gke.NumMethod() {
		name := gke.Method(k).Name
		p, ok := gkePermissions[name]
		if !ok {
			t.Errorf("clusters.GKE.%s needs a permission: map it in gkePermissions", name)
		}
		if !slices.Contains(perms, p) {
			perms = append(perms, p)
		}
	}
	sort.Strings(perms)
	for _, p := range platforms {
		role := m.instanceWith("google_project_iam_custom_role", "project", p)
		if role == nil {
			t.Errorf("project %s has no custom role of the reconciler's GKE calls", p)
			continue
		}
		if diff := cmp.Diff(perms, slices.Sorted(slices.Values(stringsOf(role.attrs["permissions"])))); diff != "" {
			t.Errorf("%s permissions (-the GKE calls' +granted):\n%s", role.addr(), diff)
		}
		want = append(want, grant{sa(reconcile.account), role.str("name"), "project " + p})
	}
	want = append(want, grant{sa(reconcile.account), "roles/iam.serviceAccountUser", accountName(nodesAccount)})
	// The callers of the internal functions: each may invoke one service.
	want = append(want, grant{sa(tasksAccount), "roles/run.invoker", "run " + reconcile.name})
	var schedulers int
	for _, job := range m.ofType("google_cloud_scheduler_job") {
		target, err := m.nested(job, "http_target")
		if err != nil || len(target) != 1 {
			t.Fatalf("%s: http_target: %v", job.addr(), err)
		}
		oidc, err := m.nested(job, "http_target", "oidc_token")
		if err != nil || len(oidc) != 1 {
			t.Fatalf("%s: oidc_token: %v", job.addr(), err)
		}
		if uri := str(target[0]["uri"]); uri != str(watchdog.env["RECONCILE_AUDIENCE"]) {
			t.Errorf("%s calls %q, not the watchdog", job.addr(), uri)
		}
		if aud := str(oidc[0]["audience"]); aud != str(watchdog.env["RECONCILE_AUDIENCE"]) {
			t.Errorf("%s mints tokens for %q, not the watchdog's RECONCILE_AUDIENCE", job.addr(), aud)
		}
		schedulers++
		want = append(want, grant{sa(str(oidc[0]["service_account_email"])), "roles/run.invoker", "run " + watchdog.name})
	}
	if schedulers != 1 {
		t.Errorf("%d Cloud Scheduler jobs, want 1 (the watchdog's)", schedulers)
	}
	// The nodes: their logs and metrics in their project, the images this
	// project publishes.
	for _, p := range platforms {
		want = append(want,
			grant{sa(nodesAccount), "roles/logging.logWriter", "project " + p},
			grant{sa(nodesAccount), "roles/monitoring.metricWriter", "project " + p})
	}
	repo := m.instanceWith("google_artifact_registry_repository", "repository_id", imageRepoID)
	if repo == nil || !strings.Contains(image, "/"+imageRepoID+"/") {
		t.Fatalf("no Artifact Registry repository %q holds var.image", imageRepoID)
	}
	want = append(want, grant{sa(nodesAccount), "roles/artifactregistry.reader", "repository " + repo.str("name")})
	// A platform project's service agents attach the nodes' account, which
	// lives in this project, to the nodes they create.
	for _, p := range platforms {
		if p == project {
			continue
		}
		proj := m.instanceWith("data.google_project", "project_id", p)
		if proj == nil {
			t.Errorf("no data.google_project reads the number of platform project %s", p)
			continue
		}
		want = append(want,
			grant{fmtAgent(proj.str("number"), "container-engine-robot"), "roles/iam.serviceAccountTokenCreator", accountName(nodesAccount)},
			grant{fmtAgent(proj.str("number"), "compute-system"), "roles/iam.serviceAccountUser", accountName(nodesAccount)})
	}

	byMember := func(gs []grant) map[string][]string {
		out := map[string][]string{}
		for _, g := range gs {
			if !slices.Contains(out[g.member], g.String()) {
				out[g.member] = append(out[g.member], g.String())
			}
		}
		for _, v := range out {
			sort.Strings(v)
		}
		return out
	}
	if diff := cmp.Diff(byMember(want), byMember(got)); diff != "" {
		t.Errorf("roles by member (-what the code needs +what the Terraform grants):\n%s", diff)
	}
	// Every account is somebody's identity.
	members := byMember(want)
	for _, i := range m.ofType("google_service_account") {
		if _, ok := members[sa(i.str("email"))]; !ok && !slices.ContainsFunc(want, func(g grant) bool { return g.target == "serviceAccount "+i.str("name") }) {
			t.Errorf("%s is nobody's identity", i.addr())
		}
	}
}

func fmtAgent(number, domain string) string {
	return strings.Replace(strings.Replace(serviceAgent, "%s", number, 1), "%s", domain, 1)
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

var (
	messageRE = regexp.MustCompile(`jsonPayload\.message="((?:[^"\\]|\\.)*)"`)
	errorRE   = regexp.MustCompile(`jsonPayload\.error=~"\^\(([^)"]*)\)"`)
	extractRE = regexp.MustCompile(`^EXTRACT\(jsonPayload\.([A-Za-z0-9_]+)\)$`)
	metricRE  = regexp.MustCompile(`metric\.type="logging\.googleapis\.com/user/([^"]+)"`)
)

// TestLogMetricsReadLoggedLines checks that every log-based metric counts
// lines the code writes (their message, the start of their error, the
// fields its labels read) and that every alert reads a metric that exists.
func TestLogMetricsReadLoggedLines(t *testing.T) {
	m := tf(t)
	lits := goStrings(t, "../shared", "../functions")
	metrics := map[string]bool{}
	for _, i := range m.ofType("google_logging_metric") {
		metrics[i.str("name")] = true
		filter := i.str("filter")
		msgs := messageRE.FindAllStringSubmatch(filter, -1)
		if len(msgs) == 0 {
			t.Errorf("%s: its filter %q names no jsonPayload.message", i.addr(), filter)
		}
		for _, mm := range msgs {
			msg, err := strconv.Unquote(`"` + mm[1] + `"`)
			if err != nil {
				t.Fatal(err)
			}
			if !lits[msg] {
				t.Errorf("%s counts lines with message %q, which no code logs", i.addr(), msg)
			}
		}
		for _, em := range errorRE.FindAllStringSubmatch(filter, -1) {
			for _, prefix := range strings.Split(em[1], "|") {
				if !hasPrefixIn(lits, prefix) {
					t.Errorf("%s matches errors starting %q, which no code writes", i.addr(), prefix)
				}
			}
		}
		if le := i.attrs["label_extractors"]; le != cty.NilVal && !le.IsNull() {
			for it := le.ElementIterator(); it.Next(); {
				k, v := it.Element()
				f := extractRE.FindStringSubmatch(str(v))
				if f == nil {
					t.Errorf("%s: label %s: %q is not EXTRACT(jsonPayload.FIELD)", i.addr(), str(k), str(v))
				} else if !lits[f[1]] {
					t.Errorf("%s: label %s reads field %q, which no code logs", i.addr(), str(k), f[1])
				}
			}
		}
	}
	for _, p := range m.ofType("google_monitoring_alert_policy") {
		conds, err := m.nested(p, "conditions", "condition_threshold")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range conds {
			for _, mm := range metricRE.FindAllStringSubmatch(str(c["filter"]), -1) {
				if !metrics[mm[1]] {
					t.Errorf("%s reads metric %q, which no google_logging_metric defines", p.addr(), mm[1])
				}
			}
		}
		docs, err := m.nested(p, "documentation")
		if err != nil || len(docs) != 1 || !strings.Contains(str(docs[0]["content"]), "Runbook") {
			t.Errorf("%s has no documentation pointing at its runbook", p.addr())
		}
	}
}

func hasPrefixIn(set map[string]bool, prefix string) bool {
	for s := range set {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// goStrings returns the string constants of the non-test Go files under
// dirs.
func goStrings(t *testing.T, dirs ...string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						out[s] = true
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestTerraformIsFormatted checks what terraform fmt -check checks in CI.
func TestTerraformIsFormatted(t *testing.T) {
	for name, src := range tf(t).files {
		if out := hclwrite.Format(src); !bytes.Equal(out, src) {
			t.Errorf("%s is not formatted as terraform fmt would", name)
		}
	}
}
