// Package infra holds the Terraform of the production deployment. Its
// tests read that Terraform with HCL and fail when it and the code drift
// apart: a function without its service or a variable its configuration
// requires, an event type without its topic, a query without its index, a
// service account with a role its code does not need or without one it
// does, an alert on a log line the code no longer writes. They also build
// the image's binary as functions/Dockerfile does.
package infra

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
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

	gfirestore "cloud.google.com/go/firestore"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/better-compute/kubernetes/functions/api"
	"github.com/better-compute/kubernetes/functions/cloudrun"
	"github.com/better-compute/kubernetes/functions/poolevents"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/clusters"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/substrates"
)

// The values of the variables without defaults, and two platform
// projects: this one and another, so that every for_each over them has
// something to expand.
const (
	project      = "bc-prod"
	platform     = "bc-platform-1"
	image        = "europe-west1-docker.pkg.dev/bc-prod/functions/server@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	bcdImage     = "europe-west1-docker.pkg.dev/bc-prod/functions/bcd@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	domain       = "api.example.com"
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
			"bcd_image":         cty.StringVal(bcdImage),
			"domain":            cty.StringVal(domain),
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
	// What the substrates put in their clusters: bcd's image, and the join
	// method's URL behind the HTTPS entry, which bcd calls from the nodes.
	if got := str(reconcile.env["BCD_IMAGE"]); got != bcdImage {
		t.Errorf("the reconcile service's BCD_IMAGE = %q, want var.bcd_image", got)
	}
	joinURL := "https://" + domain + api.Method{Resource: "kubernetesSubstrates", Verb: "join"}.Path()
	if got := str(reconcile.env["SUBSTRATE_JOIN_URL"]); got != joinURL {
		t.Errorf("the reconcile service's SUBSTRATE_JOIN_URL = %q, want the join method's public URL %q", got, joinURL)
	}
	// A CloudEvent function is called by its push subscriptions alone,
	// from inside Google: internal ingress.
	for _, f := range cloudrun.Functions() {
		if s, ok := svcs[f.Name]; ok && len(f.Topics) > 0 {
			if got := s.inst.str("ingress"); got != "INGRESS_TRAFFIC_INTERNAL_ONLY" {
				t.Errorf("%s (%s) has ingress %q, want INGRESS_TRAFFIC_INTERNAL_ONLY", s.inst.addr(), f.Name, got)
			}
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

// TestEventTopics checks that each event type has its topic; that each
// topic a CloudEvent function consumes is the pools module's, read as a
// data source rather than made here, with a subscription pushing it to the
// function's service with an OIDC token, a retry policy and a dead-letter
// topic that a subscription keeps; and that no other topic exists.
func TestEventTopics(t *testing.T) {
	m := tf(t)
	topics := map[string]*instance{}
	for _, i := range m.ofType("google_pubsub_topic") {
		topics[i.str("name")] = i
	}
	want := map[string]bool{}
	for _, typ := range event.Types {
		want[typ] = true
		if topics[typ] == nil {
			t.Errorf("event type %s has no topic", typ)
		}
	}
	// The topics of other modules, read: by name.
	external := map[string]*instance{}
	for _, i := range m.ofType("data.google_pubsub_topic") {
		external[i.str("name")] = i
	}
	svcs := services(t, m)
	for _, f := range cloudrun.Functions() {
		for _, topic := range f.Topics {
			// The pools module publishes these: it owns them (API.md §9).
			if topics[topic] != nil {
				t.Errorf("%s: topic %s is the pools module's: read it with a data source, do not make it", topics[topic].addr(), topic)
			}
			ext := external[topic]
			if ext == nil {
				t.Errorf("function %s consumes topic %s, which no data.google_pubsub_topic reads", f.Name, topic)
				continue
			}
			var pushed bool
			for _, sub := range m.ofType("google_pubsub_subscription") {
				ref := sub.str("topic")
				if ref != ext.str("id") && !strings.HasSuffix(ref, "/topics/"+topic) {
					continue
				}
				push, err := m.nested(sub, "push_config")
				if err != nil {
					t.Fatal(err)
				}
				if len(push) != 1 || !strings.Contains(str(push[0]["push_endpoint"]), svcs[f.Name].name) {
					continue
				}
				pushed = true
				checkPushSubscription(t, m, sub, svcs[f.Name], topics, want)
			}
			if !pushed {
				t.Errorf("function %s consumes topic %s, but no subscription of it pushes to its service", f.Name, topic)
			}
		}
	}
	for name, i := range topics {
		if !want[name] {
			t.Errorf("%s: topic %q is no event type, no function consumes it and no subscription dead-letters to it", i.addr(), name)
		}
	}
}

// checkPushSubscription checks a subscription pushing to svc: an OIDC token
// for the service's URL, retries with backoff, and a dead-letter topic of
// this project (which it adds to topics that may exist) that a
// subscription keeps.
func checkPushSubscription(t *testing.T, m *module, sub *instance, svc service, topics map[string]*instance, allowed map[string]bool) {
	t.Helper()
	push, _ := m.nested(sub, "push_config")
	oidc, err := m.nested(sub, "push_config", "oidc_token")
	if err != nil || len(oidc) != 1 || str(oidc[0]["service_account_email"]) == "" {
		t.Errorf("%s pushes without an OIDC token: Cloud Run would refuse it (%v)", sub.addr(), err)
	} else if aud := str(oidc[0]["audience"]); !strings.HasPrefix(aud, "https://"+svc.name+"-") || strings.Contains(strings.TrimPrefix(aud, "https://"), "/") {
		t.Errorf("%s: OIDC audience %q, want the service's URL (%s), which Cloud Run checks", sub.addr(), aud, svc.name)
	}
	if ep := str(push[0]["push_endpoint"]); !strings.Contains(ep, "/projects/") || !strings.Contains(ep, "/topics/") {
		t.Errorf("%s: push endpoint %q: the Functions Framework reads the topic from the path .../projects/P/topics/T", sub.addr(), ep)
	}
	retry, err := m.nested(sub, "retry_policy")
	if err != nil || len(retry) != 1 || str(retry[0]["minimum_backoff"]) == "" || str(retry[0]["maximum_backoff"]) == "" {
		t.Errorf("%s has no retry policy with backoff: a failing push is retried at once, again and again (%v)", sub.addr(), err)
	}
	if exp, err := m.nested(sub, "expiration_policy"); err != nil || len(exp) != 1 || str(exp[0]["ttl"]) != "" {
		t.Errorf("%s: want expiration_policy ttl \"\": an idle subscription would be deleted after 31 days (%v)", sub.addr(), err)
	}
	dl, err := m.nested(sub, "dead_letter_policy")
	if err != nil || len(dl) != 1 {
		t.Errorf("%s has no dead-letter policy: a message that always fails is retried for its whole retention (%v)", sub.addr(), err)
		return
	}
	attempts, _ := dl[0]["max_delivery_attempts"].AsBigFloat().Int64()
	if attempts < 5 || attempts > 100 {
		t.Errorf("%s: max_delivery_attempts %d, want 5 to 100 (Pub/Sub's bounds)", sub.addr(), attempts)
	}
	var dead *instance
	for name, i := range topics {
		if str(dl[0]["dead_letter_topic"]) == i.str("id") {
			dead, allowed[name] = i, true
		}
	}
	if dead == nil {
		t.Errorf("%s dead-letters to %q, which is no topic of this project", sub.addr(), str(dl[0]["dead_letter_topic"]))
		return
	}
	for _, s := range m.ofType("google_pubsub_subscription") {
		if s.str("topic") == dead.str("id") {
			return
		}
	}
	t.Errorf("%s has no subscription: what is dead-lettered to it is dropped", dead.addr())
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

// computePermissions maps each call of shared/clusters.Compute (the
// reading of the pools' instance groups, currentNodeCount) to the
// permission it needs, as gkePermissions does for GKE's.
var computePermissions = map[string]string{
	"AggregatedList": "compute.instanceGroupManagers.list",
}

// providerPermissions are the permissions of the reconciler's provider
// calls (shared/clusters.GKE and Compute), sorted, each once; a call not
// mapped fails t.
func providerPermissions(t *testing.T) []string {
	var perms []string
	for _, c := range []struct {
		iface reflect.Type
		perms map[string]string
	}{{reflect.TypeFor[clusters.GKE](), gkePermissions}, {reflect.TypeFor[clusters.Compute](), computePermissions}} {
		for k := range c.iface.NumMethod() {
			name := c.iface.Method(k).Name
			p, ok := c.perms[name]
			if !ok {
				t.Errorf("clusters.%s.%s needs a permission: map it", c.iface.Name(), name)
			}
			perms = append(perms, p)
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(perms)))
}

// kubePermissions maps each call the substrates make to a cluster's
// Kubernetes API (substrates.Connector and substrates.KubeAPI, served by
// shared/kubeapply) to the GKE IAM permissions of its requests. GKE maps
// the Kubernetes verbs get, list, create, update and patch (server-side
// apply), and delete to container.<kind>.get, .list, .create, .update and
// .delete. A call added to either interface fails the test until it is
// mapped here.
var kubePermissions = map[string][]string{
	// Connect makes no request, but GKE lets an IAM principal reach a
	// cluster's Kubernetes API only with container.clusters.get.
	"Connect": {"container.clusters.get"},
	// Apply reads each of bcd's objects, then server-side applies it,
	// which creates it when it is missing (authorized as create).
	"Apply": {
		"container.namespaces.get", "container.namespaces.create", "container.namespaces.update",
		"container.serviceAccounts.get", "container.serviceAccounts.create", "container.serviceAccounts.update",
		"container.secrets.get", "container.secrets.create", "container.secrets.update",
		"container.daemonSets.get", "container.daemonSets.create", "container.daemonSets.update",
	},
	// Remove reads each object and deletes the pool's.
	"Remove": {
		"container.namespaces.get", "container.namespaces.delete",
		"container.serviceAccounts.get", "container.serviceAccounts.delete",
		"container.secrets.get", "container.secrets.delete",
		"container.daemonSets.get", "container.daemonSets.delete",
	},
	// Check only reads each of bcd's objects.
	"Check": {
		"container.namespaces.get", "container.serviceAccounts.get",
		"container.secrets.get", "container.daemonSets.get",
	},
	"Nodes": {"container.nodes.list"},
	"Node":  {"container.nodes.get"},
}

// kubeCallers names the function whose requests run the code of each file
// of shared/substrates and shared/join (kubeCallerDirs) that calls a
// cluster's Kubernetes API.
var kubeCallers = map[string]string{
	"join/join.go":             api.Method{Resource: "kubernetesSubstrates", Verb: "join"}.Function(),
	"substrates/reconciler.go": cloudrun.ReconcileFunction,
}

// kubeCallerDirs are the packages that reach a cluster's Kubernetes API
// through substrates.Connector.
var kubeCallerDirs = []string{"substrates", "join"}

// kubeCalls returns, by function, the Kubernetes API permissions of the
// substrates' calls its code makes: the calls of kubePermissions found in
// the files of kubeCallerDirs.
func kubeCalls(t *testing.T) map[string][]string {
	t.Helper()
	calls := map[string]bool{}
	for _, typ := range []reflect.Type{reflect.TypeFor[substrates.KubeAPI](), reflect.TypeFor[substrates.Connector]()} {
		for k := range typ.NumMethod() {
			name := typ.Method(k).Name
			if _, ok := kubePermissions[name]; !ok {
				t.Errorf("substrates.%s.%s reaches a cluster's Kubernetes API: map its permissions in kubePermissions", typ.Name(), name)
			}
			calls[name] = true
		}
	}
	out := map[string][]string{}
	var files []string
	for _, dir := range kubeCallerDirs {
		in, err := filepath.Glob("../shared/" + dir + "/*.go")
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, in...)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		var called []string
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if sel, ok := c.Fun.(*ast.SelectorExpr); ok && calls[sel.Sel.Name] {
					called = append(called, sel.Sel.Name)
				}
			}
			return true
		})
		if len(called) == 0 {
			continue
		}
		fn, ok := kubeCallers[filepath.Base(filepath.Dir(path))+"/"+filepath.Base(path)]
		if !ok {
			t.Errorf("%s calls %v of a cluster's Kubernetes API: say in kubeCallers which function runs it", path, called)
			continue
		}
		for _, c := range called {
			out[fn] = append(out[fn], kubePermissions[c]...)
		}
	}
	for fn, perms := range out {
		slices.Sort(perms)
		out[fn] = slices.Compact(perms)
	}
	return out
}

// consumerNeeds says what the pool events' consumer, which each
// CloudEvent function builds (poolevents.NewConsumer), can call, from what
// its constructor takes: Firestore, a kicker (the reconcile queue's tasks,
// with the tasks identity's OIDC tokens), an event sender.
func consumerNeeds() (firestore, kicks, publishes bool) {
	ctor := reflect.TypeOf(poolevents.NewConsumer)
	kicker := reflect.TypeFor[chain.Kicker]()
	sender := reflect.TypeFor[substrates.EventSender]()
	for k := range ctor.NumIn() {
		in := ctor.In(k)
		switch {
		case in == reflect.TypeFor[*gfirestore.Client]() || in == reflect.TypeFor[*store.Store]() ||
			// A store interface declared by the consumer: the store is what
			// the composition root gives it.
			in.Kind() == reflect.Interface && reflect.TypeFor[*store.Store]().Implements(in) && in.NumMethod() > 0:
			firestore = true
		case in.Implements(kicker) || in == kicker:
			kicks = true
		case in.Implements(sender) || in == sender:
			publishes = true
		}
	}
	return
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
		"google_pubsub_subscription_iam_member":          "subscription",
		"google_cloud_tasks_queue_iam_member":            "queue",
		"google_service_account_iam_member":              "serviceAccount",
		"google_cloud_run_v2_service_iam_member":         "run",
		"google_artifact_registry_repository_iam_member": "repository",
	}
	targetArg := map[string]string{"project": "project", "topic": "topic", "subscription": "subscription", "queue": "name", "serviceAccount": "service_account_id", "run": "name", "repository": "repository"}
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
	// Every queue the functions enqueue on: each tenant's changes on one
	// of TASKS_QUEUE's, steady runs on TASKS_STEADY_QUEUE's.
	changes, steady := reconcileQueues(t, m, reconcile)
	queues := append(changes, steady...)

	var want []grant
	consumerFirestore, consumerKicks, consumerPublishes := consumerNeeds()
	for _, f := range cloudrun.Functions() {
		id := sa(svcs[f.Name].account)
		// Every HTTP function builds the same core (functions/cloudrun):
		// Firestore (no finer resource than the project for data
		// access), the outbox relay, whose publishes and whose drain
		// may carry any event type, and the reconcile queue, whose
		// tasks carry the tasks identity's OIDC tokens (actAs). A
		// CloudEvent function builds the pool events' consumer, which
		// calls what its constructor takes.
		firestore, kicks, publishes := true, true, true
		if len(f.Topics) > 0 {
			firestore, kicks, publishes = consumerFirestore, consumerKicks, consumerPublishes
		}
		if firestore {
			want = append(want, grant{id, "roles/datastore.user", "project " + project})
		}
		if publishes {
			for _, typ := range event.Types {
				want = append(want, grant{id, "roles/pubsub.publisher", "topic " + typ})
			}
		}
		if kicks {
			for _, q := range queues {
				want = append(want, grant{id, "roles/cloudtasks.enqueuer", "queue " + q.str("name")})
			}
			want = append(want, grant{id, "roles/iam.serviceAccountUser", accountName(tasksAccount)})
		}
		// On Cloud Run every function exports its metrics and spans to
		// the Telemetry API (cloudrun.Config.Telemetry, shared/telemetry).
		want = append(want,
			grant{id, "roles/telemetry.metricsWriter", "project " + project},
			grant{id, "roles/telemetry.tracesWriter", "project " + project})
		if strings.HasPrefix(f.Path, "/api/") {
			// Tenants' tokens (and bcd's join tokens) are checked by the
			// function itself.
			want = append(want, grant{"allUsers", "roles/run.invoker", "run " + svcs[f.Name].name})
		}
	}

	// What each function calls in the platform projects, granted by
	// custom roles there: the reconciler's GKE calls, and the substrates'
	// calls to their clusters' Kubernetes APIs. The reconciler also gets
	// actAs on the nodes' account that it sets on what it creates.
	needs := kubeCalls(t)
	needs[cloudrun.ReconcileFunction] = append(needs[cloudrun.ReconcileFunction], providerPermissions(t)...)
	customRoles := map[string]*instance{} // by name, as the bindings name them
	for _, r := range m.ofType("google_project_iam_custom_role") {
		customRoles[r.str("name")] = r
	}
	for _, fn := range slices.Sorted(maps.Keys(needs)) {
		perms := slices.Compact(slices.Sorted(slices.Values(needs[fn])))
		id := sa(svcs[fn].account)
		for _, p := range platforms {
			var granted []string
			for _, g := range got {
				r := customRoles[g.role]
				if g.member != id || g.target != "project "+p || r == nil {
					continue
				}
				if r.str("project") != p {
					t.Errorf("%s is granted in project %s, where it is not defined", r.addr(), p)
				}
				granted = append(granted, stringsOf(r.attrs["permissions"])...)
				want = append(want, g)
			}
			granted = slices.Compact(slices.Sorted(slices.Values(granted)))
			if diff := cmp.Diff(perms, granted); diff != "" {
				t.Errorf("%s in project %s: permissions of its custom roles (-what its code calls +granted):\n%s", fn, p, diff)
			}
		}
	}
	want = append(want, grant{sa(reconcile.account), "roles/iam.serviceAccountUser", accountName(nodesAccount)})

	// The push subscriptions of the CloudEvent functions: their OIDC
	// tokens' account may invoke the function's service, and Pub/Sub's
	// service agent mints those tokens and moves dead letters (it
	// publishes to the dead-letter topic and acknowledges on the
	// subscription).
	this := m.resources["data.google_project.this"]
	if this == nil || this.instances[""] == nil {
		t.Fatal("no data.google_project.this reads this project's number")
	}
	pubsubAgent := fmtAgent(this.instances[""].str("number"), "gcp-sa-pubsub")
	for _, f := range cloudrun.Functions() {
		if len(f.Topics) == 0 {
			continue
		}
		svc := svcs[f.Name]
		for _, sub := range m.ofType("google_pubsub_subscription") {
			oidc, err := m.nested(sub, "push_config", "oidc_token")
			push, _ := m.nested(sub, "push_config")
			if err != nil || len(oidc) != 1 || len(push) != 1 || !strings.Contains(str(push[0]["push_endpoint"]), svc.name) {
				continue
			}
			pusher := str(oidc[0]["service_account_email"])
			// The function accepts the tokens of this account, for this
			// audience, and no one else's.
			if got := str(svc.env["PUSH_SERVICE_ACCOUNT"]); got != pusher {
				t.Errorf("%s (%s) accepts PUSH_SERVICE_ACCOUNT %q, but %s pushes as %q", svc.inst.addr(), f.Name, got, sub.addr(), pusher)
			}
			if got, aud := str(svc.env["PUSH_AUDIENCE"]), str(oidc[0]["audience"]); got != aud {
				t.Errorf("%s (%s) accepts PUSH_AUDIENCE %q, but %s pushes tokens for %q", svc.inst.addr(), f.Name, got, sub.addr(), aud)
			}
			want = append(want,
				grant{sa(pusher), "roles/run.invoker", "run " + svc.name},
				grant{pubsubAgent, "roles/iam.serviceAccountTokenCreator", accountName(pusher)})
			dl, err := m.nested(sub, "dead_letter_policy")
			if err != nil || len(dl) != 1 {
				continue
			}
			dead := m.instanceWith("google_pubsub_topic", "id", str(dl[0]["dead_letter_topic"]))
			if dead == nil {
				t.Errorf("%s dead-letters to no topic of this project", sub.addr())
				continue
			}
			want = append(want,
				grant{pubsubAgent, "roles/pubsub.subscriber", "subscription " + sub.str("name")},
				grant{pubsubAgent, "roles/pubsub.publisher", "topic " + dead.str("name")})
		}
	}
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
		if got, caller := str(watchdog.env["SCHEDULER_SERVICE_ACCOUNT"]), str(oidc[0]["service_account_email"]); got != caller {
			t.Errorf("the watchdog accepts SCHEDULER_SERVICE_ACCOUNT %q, but %s calls as %q", got, job.addr(), caller)
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

// reconcileQueues returns the queues that svc's TASKS_QUEUE and
// TASKS_STEADY_QUEUE name, split as the code splits them and in their
// order; a name that is no queue of the Terraform fails the test.
func reconcileQueues(t *testing.T, m *module, svc service) (changes, steady []*instance) {
	t.Helper()
	c := cloudrun.Config{TasksQueue: str(svc.env["TASKS_QUEUE"]), TasksSteadyQueue: str(svc.env["TASKS_STEADY_QUEUE"])}
	find := func(v string, names []string) []*instance {
		var out []*instance
		for _, name := range names {
			q := m.instanceWith("google_cloud_tasks_queue", "id", name)
			if q == nil {
				t.Fatalf("%s (%s) names %q in %s, which is no queue of the Terraform", svc.inst.addr(), svc.name, name, v)
			}
			out = append(out, q)
		}
		return out
	}
	return find("TASKS_QUEUE", c.ChangeQueues()), find("TASKS_STEADY_QUEUE", c.SteadyQueues())
}

// TestReconcileQueues checks the queues of reconcile runs against the
// fair shares between tenants (API.md §10, infra/README.md): every
// function names the same queues in the same order, since each instance
// hashes a tenant to one of them by its position (tasks.TenantShard);
// there are tenant_queues queues of changes, the first keeping the one
// queue's name, with the same limits and retries, as are the steady
// ones among themselves; every queue is named by one of the lists; and
// the reconcile service takes one queue's runs in flight and the steady
// queues' together with room to spare, so that a tenant that fills its
// own queue leaves the others' runs instances to run on.
func TestReconcileQueues(t *testing.T) {
	m := tf(t)
	svcs := services(t, m)
	reconcile := svcs[cloudrun.ReconcileFunction]
	for target, s := range svcs {
		for _, v := range []string{"TASKS_QUEUE", "TASKS_STEADY_QUEUE"} {
			if got, want := str(s.env[v]), str(reconcile.env[v]); got != want {
				t.Errorf("%s (%s) has %s %q, want the reconcile service's %q: every instance must hash tenants over the same queues", s.inst.addr(), target, v, got, want)
			}
		}
	}
	changes, steady := reconcileQueues(t, m, reconcile)
	n, _ := m.vars["tenant_queues"].AsBigFloat().Int64()
	if len(changes) != int(n) {
		t.Errorf("TASKS_QUEUE names %d queues, want var.tenant_queues (%d)", len(changes), n)
	}
	if len(changes) == 0 || changes[0].str("name") != "reconcile" {
		t.Errorf("the first queue of TASKS_QUEUE is not the deployment's queue \"reconcile\"")
	}
	named := map[string]bool{}
	for _, qs := range [][]*instance{changes, steady} {
		for _, q := range qs {
			if named[q.addr()] {
				t.Errorf("%s is named twice in TASKS_QUEUE and TASKS_STEADY_QUEUE", q.addr())
			}
			named[q.addr()] = true
			for _, block := range []string{"rate_limits", "retry_config"} {
				got, err := m.nested(q, block)
				if err != nil || len(got) != 1 {
					t.Fatalf("%s: %s: %v", q.addr(), block, err)
				}
				want, _ := m.nested(qs[0], block)
				if !cty.ObjectVal(got[0]).RawEquals(cty.ObjectVal(want[0])) {
					t.Errorf("%s: %s %v, want %s's %v", q.addr(), block, got[0], qs[0].addr(), want[0])
				}
			}
		}
	}
	for _, q := range m.ofType("google_cloud_tasks_queue") {
		if !named[q.addr()] {
			t.Errorf("%s is in neither TASKS_QUEUE nor TASKS_STEADY_QUEUE: no run goes to it", q.addr())
		}
	}

	dispatches := func(q *instance) int64 {
		rl, err := m.nested(q, "rate_limits")
		if err != nil || len(rl) != 1 {
			t.Fatalf("%s: rate_limits: %v", q.addr(), err)
		}
		v, _ := rl[0]["max_concurrent_dispatches"].AsBigFloat().Int64()
		return v
	}
	inFlight := dispatches(changes[0])
	for _, q := range steady {
		inFlight += dispatches(q)
	}
	tmpl, err := m.nested(reconcile.inst, "template")
	if err != nil || len(tmpl) != 1 {
		t.Fatalf("%s: template: %v", reconcile.inst.addr(), err)
	}
	scaling, err := m.nested(reconcile.inst, "template", "scaling")
	if err != nil || len(scaling) != 1 {
		t.Fatalf("%s: scaling: %v", reconcile.inst.addr(), err)
	}
	perInstance, _ := tmpl[0]["max_instance_request_concurrency"].AsBigFloat().Int64()
	instances, _ := scaling[0]["max_instance_count"].AsBigFloat().Int64()
	if capacity := perInstance * instances; capacity <= inFlight {
		t.Errorf("the reconcile service runs %d at once, but one queue of changes and the steady queues dispatch %d: one tenant's flood and the refreshes would leave no instance to the other tenants' queues", capacity, inFlight)
	}
}

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
