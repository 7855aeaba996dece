package infra

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ctemu "github.com/better-compute/kubernetes/emulators/cloudtasks"
	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	psemu "github.com/better-compute/kubernetes/emulators/pubsub"
	"github.com/better-compute/kubernetes/functions/cloudrun"
	"github.com/better-compute/kubernetes/functions/poolevents"
	"github.com/better-compute/kubernetes/shared/auth/devissuer"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// queryClauses counts, for each file of the code, the calls that build a
// Firestore query (Where, OrderBy, CollectionGroup, ...). exercise runs
// every query they build, and TestEveryQueryHasItsIndex checks each
// against the indexes. A count that changes means a query was added,
// changed or removed: run it in exercise, then update the count.
var queryClauses = map[string]int{
	// CollectionGroup, Where, Where, OrderBy: the watchdog's overdue
	// chains (the watchdog function).
	"shared/store/chain.go": 4,
	// CollectionGroup, Where, OrderBy: the outbox drain (the watchdog).
	"shared/store/outbox.go": 3,
	// Where, Where (poolId), OrderBy, OrderBy: kubernetesClusters-list,
	// with and without poolId.
	"shared/store/clusters.go": 4,
	// Where, OrderBy: a cluster's active pools (kubernetesNodePools-list
	// and every reconcile run).
	"shared/store/nodepools.go": 2,
	// Where, Where (poolId), OrderBy: kubernetesSubstrates-list, with and
	// without poolId; OrderBy (document ID): kubernetesSubstrates-listNodes
	// and the substrates' runs.
	"shared/store/substrates.go": 4,
	// Where (active): the seed's count of a tenant's clusters that are
	// not deleted, when it sets the tenant's quota (functions/cmd/seed).
	"shared/store/seed.go": 1,
	// The devstack's alone (its console and its /dev routes, which reach
	// the product's documents through these store functions):
	// CollectionGroup, Where (tenantId), OrderBy x3 (tenantId, createdAt,
	// id) and Where (active): the console's first view of the fleet, a
	// page of clusters and one of substrates, before it listens;
	// CollectionGroup, Where (clusterId in): their node pools;
	// CollectionGroup, Where (id): GET /dev/clusters/{id}/kubeconfig finds
	// a cluster by ID; CollectionGroup x2 (with the node pools' above):
	// the console listens to every tenant's clusters, node pools and
	// substrates. functions/cmd/server, the deployed image, never calls
	// them (nothing but functions/devstack does), so they run only
	// against the Firestore emulator, need no index and are not
	// exercised.
	"shared/store/console.go": 12,
}

var queryMethods = []string{"Where", "WherePath", "WhereEntity", "OrderBy", "OrderByPath", "CollectionGroup", "FindNearest", "FindNearestPath"}

// TestQueriesAreExercised counts the query-building calls of the code,
// so that a new query cannot escape TestEveryQueryHasItsIndex.
func TestQueriesAreExercised(t *testing.T) {
	got := map[string]int{}
	for _, dir := range []string{"shared", "functions"} {
		err := filepath.WalkDir(filepath.Join("..", dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if sel, ok := c.Fun.(*ast.SelectorExpr); ok && slices.Contains(queryMethods, sel.Sel.Name) {
						rel, _ := filepath.Rel("..", path)
						got[filepath.ToSlash(rel)]++
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
	for file, n := range got {
		if queryClauses[file] != n {
			t.Errorf("%s builds queries with %d calls, the test knows of %d: run its queries in exercise (indexes_test.go), then set queryClauses", file, n, queryClauses[file])
		}
	}
	for file, n := range queryClauses {
		if got[file] == 0 {
			t.Errorf("%s no longer builds queries (the test knows of %d calls): update queryClauses", file, n)
		}
	}
}

// query is the shape of one Firestore query: what decides its index.
type query struct {
	collection string
	group      bool     // a collection-group query
	equal      []string // fields compared for equality, sorted
	order      []order  // the index order the query reads: inequality field first, then its orders
}

type order struct {
	field string
	desc  bool
}

func (q query) String() string {
	scope := "collection"
	if q.group {
		scope = "collection group"
	}
	var o []string
	for _, f := range q.order {
		d := "asc"
		if f.desc {
			d = "desc"
		}
		o = append(o, f.field+" "+d)
	}
	return fmt.Sprintf("%s %s where %v order by %v", scope, q.collection, q.equal, o)
}

// shape reads a query as its RunQuery request states it.
func shape(sq *firestorepb.StructuredQuery) query {
	var q query
	if from := sq.GetFrom(); len(from) == 1 {
		q.collection, q.group = from[0].GetCollectionId(), from[0].GetAllDescendants()
	}
	var inequality []string
	var walk func(f *firestorepb.StructuredQuery_Filter)
	walk = func(f *firestorepb.StructuredQuery_Filter) {
		switch {
		case f.GetCompositeFilter() != nil:
			for _, sub := range f.GetCompositeFilter().GetFilters() {
				walk(sub)
			}
		case f.GetFieldFilter() != nil:
			ff := f.GetFieldFilter()
			switch ff.GetOp() {
			case firestorepb.StructuredQuery_FieldFilter_EQUAL, firestorepb.StructuredQuery_FieldFilter_IN,
				firestorepb.StructuredQuery_FieldFilter_ARRAY_CONTAINS, firestorepb.StructuredQuery_FieldFilter_ARRAY_CONTAINS_ANY:
				q.equal = append(q.equal, ff.GetField().GetFieldPath())
			default:
				inequality = append(inequality, ff.GetField().GetFieldPath())
			}
		case f.GetUnaryFilter() != nil:
			q.equal = append(q.equal, f.GetUnaryFilter().GetField().GetFieldPath())
		}
	}
	if sq.GetWhere() != nil {
		walk(sq.GetWhere())
	}
	for _, o := range sq.GetOrderBy() {
		q.order = append(q.order, order{o.GetField().GetFieldPath(), o.GetDirection() == firestorepb.StructuredQuery_DESCENDING})
	}
	// Firestore orders by the inequality fields first when the query
	// does not.
	for _, f := range inequality {
		if !slices.ContainsFunc(q.order, func(o order) bool { return o.field == f }) {
			q.order = append([]order{{field: f}}, q.order...)
		}
	}
	sort.Strings(q.equal)
	q.equal = slices.Compact(q.equal)
	q.order = trimName(q.order)
	return q
}

// trimName drops a last order by document name in the direction of the
// order before it: every index ends with it implicitly.
func trimName(o []order) []order {
	if n := len(o); n > 0 && o[n-1].field == "__name__" && (n == 1 || o[n-2].desc == o[n-1].desc) {
		return o[:n-1]
	}
	return o
}

// capture records the shape of every query the Firestore client runs.
type capture struct {
	mu      sync.Mutex
	queries map[string]query
}

func (c *capture) add(sq *firestorepb.StructuredQuery) {
	q := shape(sq)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queries[q.String()] = q
}

func (c *capture) interceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return s, err
	}
	return &recorded{ClientStream: s, c: c}, nil
}

type recorded struct {
	grpc.ClientStream
	c *capture
}

func (r *recorded) SendMsg(m any) error {
	switch req := m.(type) {
	case *firestorepb.RunQueryRequest:
		r.c.add(req.GetStructuredQuery())
	case *firestorepb.RunAggregationQueryRequest:
		r.c.add(req.GetStructuredAggregationQuery().GetStructuredQuery())
	}
	return r.ClientStream.SendMsg(m)
}

// exercise runs the functions, built as on Cloud Run by functions/cloudrun
// and pointed at the emulators, through every query the code makes: a
// cluster created and reconciled, the lists, a watchdog pass. It returns
// the queries' shapes, and the cluster the reconciler created at the GKE
// emulator.
func exercise(t *testing.T) (map[string]query, *containerpb.Cluster) {
	t.Helper()
	ctx := logging.NewContext(context.Background(), slog.New(slog.DiscardHandler))
	fs, err := fsemu.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	ps, err := psemu.NewServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	gke, err := gkeemu.NewServer(gkeemu.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gke.Close() })
	iss, err := devissuer.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { iss.Close() })
	ct, err := ctemu.NewServer(ctemu.WithLogger(slog.New(slog.DiscardHandler)), ctemu.WithTokenSource(func(ctx context.Context, audience, account string) (string, error) {
		return iss.ServiceAccountToken(account, audience, 10*time.Minute)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ct.Close() })
	const queue = "projects/bc-test/locations/europe-west1/queues/reconcile"
	tc, err := cloudtasks.NewClient(ctx, ct.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	if _, err := tc.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{
		Parent: "projects/bc-test/locations/europe-west1",
		Queue:  &cloudtaskspb.Queue{Name: queue},
	}); err != nil {
		t.Fatal(err)
	}

	// One server serves every function on its path, as the devstack
	// does; Cloud Tasks calls the reconcile function on it.
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	reconcileURL := base + "/internal/reconcile"
	const nodes = "compute-nodes@bc-test.iam.gserviceaccount.com"
	env := map[string]string{
		"GOOGLE_CLOUD_PROJECT":      "bc-test",
		"AUTH_ISSUER_URL":           iss.URL(),
		"AUTH_AUDIENCE":             "bc-api",
		"TASKS_QUEUE":               queue,
		"RECONCILE_URL":             reconcileURL,
		"TASKS_SERVICE_ACCOUNT":     "tasks@bc-test.iam.gserviceaccount.com",
		"RECONCILE_ISSUER_URL":      iss.URL(),
		"RECONCILE_AUDIENCE":        reconcileURL,
		"SCHEDULER_SERVICE_ACCOUNT": "scheduler@bc-test.iam.gserviceaccount.com",
		"PUSH_SERVICE_ACCOUNT":      "pool-events-push@bc-test.iam.gserviceaccount.com",
		"PUSH_AUDIENCE":             base + "/internal/poolEvents",
		"NODE_SERVICE_ACCOUNT":      nodes,
		"FIRESTORE_EMULATOR_HOST":   fs.Addr,
		"PUBSUB_EMULATOR_HOST":      ps.Addr,
		"CLOUD_TASKS_EMULATOR_HOST": ct.Addr(),
		"GKE_EMULATOR_HOST":         gke.Addr(),
		// What the substrates' reconciler needs; no cluster's Kubernetes
		// API is reached here.
		"BCD_IMAGE":          "bcd:test",
		"SUBSTRATE_JOIN_URL": base + "/api/compute/kubernetesSubstrates/join",
		"KUBERNETES_TOKEN":   "test",
	}
	c := &capture{queries: map[string]query{}}
	cfg, err := cloudrun.LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("LoadConfig = %v", err)
	}
	app, err := cloudrun.New(cfg, cloudrun.Options{
		Log:              slog.New(slog.DiscardHandler),
		FirestoreOptions: []option.ClientOption{option.WithGRPCDialOption(grpc.WithChainStreamInterceptor(c.interceptor))},
	})
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	srv.Config.Handler = app.Edge(app.Mux())
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	parts, err := app.Build(ctx)
	if err != nil {
		t.Fatalf("Build = %v", err)
	}
	seedFile, err := os.ReadFile("../emulators/seed/devstack.json")
	if err != nil {
		t.Fatal(err)
	}
	seed, err := store.ParseSeed(seedFile, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	if err := parts.Store.LoadSeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	// A tenant's quota, as functions/cmd/seed sets it in production.
	seed.Tenants = []store.Tenant{{ID: "acme"}}
	if err := parts.Store.LoadSeed(ctx, seed); err != nil {
		t.Fatal(err)
	}

	alice, err := iss.Token("alice", "bc-api", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	internal, err := iss.ServiceAccountToken("scheduler@bc-test.iam.gserviceaccount.com", reconcileURL, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pushToken, err := iss.ServiceAccountToken("pool-events-push@bc-test.iam.gserviceaccount.com", base+"/internal/poolEvents", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, token, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s = %d %s", path, resp.StatusCode, b)
		}
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		return out
	}

	cl := post("/api/compute/kubernetesClusters/create", alice, `{"tenantId":"acme","poolId":"pool-dev","name":"prod","mode":"standard","region":"us-central1",
		"nodePools":[{"name":"default","machineType":"e2-standard-4","nodeCount":1}]}`)
	id, _ := cl["id"].(string)
	post("/api/compute/kubernetesClusters/list", alice, `{"tenantId":"acme"}`)
	post("/api/compute/kubernetesClusters/list", alice, `{"tenantId":"acme","poolId":"pool-dev"}`)
	post("/api/compute/kubernetesNodePools/list", alice, fmt.Sprintf(`{"tenantId":"acme","clusterId":%q}`, id))
	post("/internal/watchdog", internal, `{}`)
	// A devstack started from its data file restarts every chain, through
	// the watchdog's query.
	// (This stack has no topics: what it then drains stays.)
	if res, _ := parts.Watchdog.RestartAll(ctx); res.Restarted != 1 {
		t.Fatalf("RestartAll restarted %d chains, want the cluster's", res.Restarted)
	}

	// A pools module's event, pushed to kubernetesSubstrates-poolEvents as
	// its subscription would, makes a substrate; the substrates' lists
	// read it.
	pushPoolEvent(t, base+"/internal/poolEvents", pushToken, `{"id":"pool-gpu","tenantId":"acme","version":1,
		"policy":{"substrate":{"kind":"kubernetes","account":"acc-gcp","cluster":{"create":{"region":"us-central1"}}}},
		"flavors":[{"name":"cpu","machineType":"e2-standard-4","nodeCount":1}]}`)
	post("/api/compute/kubernetesSubstrates/list", alice, `{"tenantId":"acme"}`)
	subs := post("/api/compute/kubernetesSubstrates/list", alice, `{"tenantId":"acme","poolId":"pool-gpu"}`)
	list, _ := subs["substrates"].([]any)
	if len(list) != 1 {
		t.Fatalf("kubernetesSubstrates.list of pool-gpu = %v, want its substrate", subs)
	}
	substrate, _ := list[0].(map[string]any)["id"].(string)
	post("/api/compute/kubernetesSubstrates/listNodes", alice, fmt.Sprintf(`{"tenantId":"acme","substrateId":%q,"pageSize":1}`, substrate))

	// The create's kick runs the reconciler through Cloud Tasks: it
	// creates the cluster at GKE.
	g, err := container.NewClusterManagerClient(ctx, option.WithEndpoint(gke.Addr()), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	name := fmt.Sprintf("projects/bc-dev/locations/us-central1/clusters/%s", cl["providerName"])
	var pc *containerpb.Cluster
	wait.For(t, "the reconciler to create "+name+" at GKE", func() (bool, string) {
		pc, err = g.GetCluster(ctx, &containerpb.GetClusterRequest{Name: name})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if err := app.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queries, pc
}

// pushPoolEvent posts a pool event of the pools module to the consumer
// function at url, as the CloudEvent the Functions Framework makes of a
// Pub/Sub push (binary mode), with the push subscription's token, and
// checks it was taken.
func pushPoolEvent(t *testing.T, url, token, pool string) {
	t.Helper()
	var msg poolevents.MessagePublished
	msg.Message.Data = []byte(pool)
	msg.Message.Attributes = map[string]string{"ce-type": event.PoolUpdated, "ce-id": "evt-1", "ce-specversion": "1.0", "ce-source": "//compute.better-compute.dev/tenants/acme"}
	msg.Message.MessageID = "1"
	msg.Subscription = "projects/bc-test/subscriptions/pool-events"
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("ce-specversion", "1.0")
	req.Header.Set("ce-type", poolevents.MessagePublishedType)
	req.Header.Set("ce-source", "//pubsub.googleapis.com/"+msg.Subscription)
	req.Header.Set("ce-id", "1")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s = %d %s", url, resp.StatusCode, b)
	}
}

// TestEveryQueryHasItsIndex runs the code's queries and checks that
// the Terraform gives each the index Firestore needs for it, and that it
// defines no composite or collection-group index that no query reads.
func TestEveryQueryHasItsIndex(t *testing.T) {
	m := tf(t)
	queries, pc := exercise(t)

	// The nodes' service account reaches GKE on every pool created.
	for _, np := range pc.GetNodePools() {
		if got := np.GetConfig().GetServiceAccount(); got != "compute-nodes@bc-test.iam.gserviceaccount.com" {
			t.Errorf("node pool %s created with service account %q, want NODE_SERVICE_ACCOUNT", np.GetName(), got)
		}
	}

	type composite struct {
		inst  *instance
		q     query
		used  bool
		valid bool
	}
	var composites []*composite
	for _, i := range m.ofType("google_firestore_index") {
		fields, err := m.nested(i, "fields")
		if err != nil {
			t.Fatal(err)
		}
		c := &composite{inst: i, q: query{collection: i.str("collection"), group: i.str("query_scope") == "COLLECTION_GROUP"}}
		var ords []order
		for _, f := range fields {
			ords = append(ords, order{field: str(f["field_path"]), desc: str(f["order"]) == "DESCENDING"})
		}
		c.q.order = trimName(ords)
		composites = append(composites, c)
	}
	type single struct {
		inst    *instance
		field   string
		indexes []map[string]string // order, query_scope
		used    map[int]bool
	}
	fieldConfigs := map[string]*single{} // collection/field
	for _, i := range m.ofType("google_firestore_field") {
		s := &single{inst: i, field: i.str("field"), used: map[int]bool{}}
		cfg, err := m.nested(i, "index_config")
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg) == 0 {
			continue // the automatic indexes stay
		}
		idx, err := m.nested(i, "index_config", "indexes")
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range idx {
			scope := str(x["query_scope"])
			if scope == "" {
				scope = "COLLECTION"
			}
			s.indexes = append(s.indexes, map[string]string{"order": str(x["order"]), "scope": scope})
		}
		fieldConfigs[i.str("collection")+"/"+s.field] = s
	}
	// singleIndexed says whether a single-field index serves field in
	// the query's scope, in direction o (nil: any).
	singleIndexed := func(q query, field string, o *order) bool {
		scope := "COLLECTION"
		if q.group {
			scope = "COLLECTION_GROUP"
		}
		s, ok := fieldConfigs[q.collection+"/"+field]
		if !ok {
			// Firestore indexes every field of a collection both ways,
			// and no field for collection-group queries.
			return !q.group
		}
		for k, x := range s.indexes {
			if x["scope"] == scope && (o == nil || (x["order"] == "DESCENDING") == o.desc) {
				s.used[k] = true
				return true
			}
		}
		return false
	}

	for _, q := range queries {
		fields := len(q.equal) + len(q.order)
		if len(q.order) == 0 || fields == 1 {
			// Single-field indexes serve it (merged, for equalities only).
			ok := true
			for _, f := range q.equal {
				ok = singleIndexed(q, f, nil) && ok
			}
			for _, o := range q.order {
				ok = singleIndexed(q, o.field, &o) && ok
			}
			if !ok {
				t.Errorf("query %v: no single-field index serves it: add a google_firestore_field index for its scope", q)
			}
			continue
		}
		var served bool
		for _, c := range composites {
			if c.q.collection != q.collection || c.q.group != q.group || len(c.q.order) != fields {
				continue
			}
			eq := make([]string, len(q.equal))
			for k, o := range c.q.order[:len(q.equal)] {
				eq[k] = o.field
			}
			sort.Strings(eq)
			if slices.Equal(eq, q.equal) && slices.Equal(c.q.order[len(q.equal):], q.order) {
				c.used, served = true, true
			}
		}
		if !served {
			t.Errorf("query %v has no composite index: add a google_firestore_index with its equality fields, then %v", q, q.order)
		}
	}
	for _, c := range composites {
		if !c.used {
			t.Errorf("%s (%v) serves no query the code makes", c.inst.addr(), c.q)
		}
	}
	for key, s := range fieldConfigs {
		for k, x := range s.indexes {
			if x["scope"] == "COLLECTION_GROUP" && !s.used[k] {
				t.Errorf("%s: the collection-group index %s of %s serves no query the code makes", s.inst.addr(), x["order"], key)
			}
		}
	}
	if len(queries) == 0 {
		t.Fatal("no query captured")
	}
	for _, q := range queries {
		t.Logf("query: %v", q)
	}
}
