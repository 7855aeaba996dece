package api_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	jose "github.com/go-jose/go-jose/v4"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	psemu "github.com/better-compute/kubernetes/emulators/pubsub"
	"github.com/better-compute/kubernetes/functions/api"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/auth/devissuer"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/join"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/substrates"
)

// project is the Google Cloud project of every emulator in these tests.
const project = "bc-test"

// callTimeout bounds each call's storage work: long enough for any call
// under -race on a busy machine, short enough for outage tests.
const callTimeout = 5 * time.Second

// audience is the audience the API's verifier expects.
const audience = "https://api.test.better-compute.dev"

// h is the one harness of the test binary: emulators are started once and
// every test isolates itself in a fresh tenant.
var h *harness

func TestMain(m *testing.M) {
	var err error
	h, err = newHarness(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "start harness:", err)
		os.Exit(1)
	}
	code := m.Run()
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "answers validated against /openapi.json: %d; not the document's (another method, an unknown path): %d\n", h.doc.validated.Load(), h.doc.skipped.Load())
	}
	// A run of benchmarks alone (-run '^$' -bench ...) calls the handlers
	// directly and validates nothing; any run of tests validates answers.
	if code == 0 && h.doc.validated.Load() == 0 && flag.Lookup("test.bench").Value.String() == "" {
		fmt.Fprintln(os.Stderr, "no answer was validated against /openapi.json")
		code = 1
	}
	h.close()
	os.Exit(code)
}

// harness is the API on real emulators: Firestore, Pub/Sub (emulators/pubsub) with
// every event topic, the store, the outbox relay, a development issuer and
// the token verifier, a recording kicker, and an HTTP server with every
// route.
type harness struct {
	url    string
	http   *http.Client // through doc
	doc    *documentTransport
	fsSrv  *fsemu.Server
	fs     *firestore.Client
	ps     *psemu.Server
	psc    *pubsub.Client
	store  *store.Store
	relay  *outbox.Relay
	pub    *outbox.PubSub
	issuer *devissuer.Issuer
	kicker *recordingKicker
	srv    *httptest.Server

	// clockOffset shifts the issuer's clock, to mint expired and not yet
	// valid tokens with a good signature.
	clockOffset atomic.Int64
	// ecKey and rsaKey are extra signing keys published in the issuer's
	// key set (kids "test-es" and "test-rs"), to sign tokens with claims
	// the development issuer never mints (another issuer).
	ecKey  *ecdsa.PrivateKey
	rsaKey *rsa.PrivateKey

	// failPublish fails every Pub/Sub publish of events of the tenants in
	// it (an emulator reactor); publishFailures counts the failed requests.
	failMu          sync.Mutex
	failPublish     map[string]bool
	publishFailures map[string]int

	// failCommit fails every Firestore commit writing a document of the
	// tenants in it, with the code given (an emulator reactor).
	failCommit map[string]codes.Code

	seq atomic.Int64
}

func newHarness(ctx context.Context) (_ *harness, err error) {
	hs := &harness{kicker: &recordingKicker{}, failPublish: map[string]bool{}, publishFailures: map[string]int{}, failCommit: map[string]codes.Code{}}
	defer func() {
		if err != nil {
			hs.close()
		}
	}()
	if hs.ecKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	if hs.rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return nil, err
	}

	if hs.fsSrv, err = fsemu.NewServer(fsemu.WithReactor("Commit", commitReactor{hs})); err != nil {
		return nil, fmt.Errorf("firestore emulator: %w", err)
	}
	conn, err := grpc.NewClient(hs.fsSrv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	if hs.fs, err = firestore.NewClient(ctx, project, option.WithGRPCConn(conn)); err != nil {
		return nil, fmt.Errorf("firestore client: %w", err)
	}

	if hs.ps, err = psemu.NewServer("127.0.0.1:0", psemu.WithReactor("Publish", publishReactor{hs})); err != nil {
		return nil, fmt.Errorf("pubsub emulator: %w", err)
	}
	psConn, err := grpc.NewClient(hs.ps.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	if hs.psc, err = pubsub.NewClient(ctx, project, option.WithGRPCConn(psConn)); err != nil {
		return nil, fmt.Errorf("pubsub client: %w", err)
	}
	for _, typ := range event.Types {
		name := fmt.Sprintf("projects/%s/topics/%s", project, typ)
		if _, err := hs.psc.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: name}); err != nil {
			return nil, fmt.Errorf("create topic %s: %w", name, err)
		}
	}

	if hs.store, err = store.New(hs.fs, lifecycle.Rules{}); err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("API_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	slog.SetDefault(log)
	hs.pub = outbox.NewPubSub(hs.psc)
	if hs.relay, err = outbox.NewRelay(hs.store, hs.pub, log); err != nil {
		return nil, err
	}
	hs.relay.Start()

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs.url = "http://" + lis.Addr().String()
	hs.issuer, err = devissuer.New(hs.url, devissuer.WithAudience(audience), devissuer.WithClock(offsetClock{&hs.clockOffset}))
	if err != nil {
		return nil, err
	}
	verifier, err := auth.NewVerifier(ctx, auth.Config{IssuerURL: hs.url, Audience: audience})
	if err != nil {
		return nil, err
	}
	// The join method's path to a Kubernetes API is tested in the
	// devstack, against real API servers; these tests reach none.
	joiner, err := join.New(hs.store, noKubernetes{}, hs.relay)
	if err != nil {
		return nil, err
	}
	previewer, err := substrates.NewPreviewer(hs.store)
	if err != nil {
		return nil, err
	}
	routes, err := api.Routes(api.Deps{Auth: verifier, Store: hs.store, Events: hs.relay, Kicker: hs.kicker, Timeout: callTimeout,
		Previewer: previewer, Joiner: joiner})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	for _, r := range routes {
		mux.Handle(r.Path, r.Handler)
	}
	mux.Handle(devissuer.DiscoveryPath, hs.issuer.Handler())
	mux.HandleFunc(devissuer.JWKSPath, hs.serveKeys)
	// Through the edge every function passes through: request IDs, panics.
	hs.srv = &httptest.Server{Listener: lis, Config: &http.Server{Handler: httpapi.Edge(mux), ReadHeaderTimeout: 10 * time.Second}}
	hs.srv.Start()
	// Every answer of the suite is held to /openapi.json (openapi_test.go).
	rv, err := newResponseValidator()
	if err != nil {
		return nil, err
	}
	hs.doc = &documentTransport{next: hs.srv.Client().Transport, doc: rv}
	hs.http = &http.Client{Transport: hs.doc}
	if err := verifier.Ready(ctx); err != nil {
		return nil, fmt.Errorf("verifier: %w", err)
	}

	seed, err := os.ReadFile("../../emulators/seed/devstack.json")
	if err != nil {
		return nil, err
	}
	s, err := store.ParseSeed(seed, lifecycle.Rules{})
	if err != nil {
		return nil, err
	}
	// Only the accounts are shared; pools and bindings are per tenant.
	if err := hs.store.LoadSeed(ctx, &store.Seed{Accounts: s.Accounts}); err != nil {
		return nil, err
	}
	return hs, nil
}

func (hs *harness) close() {
	if hs.srv != nil {
		hs.srv.Close()
	}
	if hs.relay != nil {
		hs.relay.Close()
	}
	if hs.pub != nil {
		hs.pub.Stop()
	}
	if hs.psc != nil {
		hs.psc.Close()
	}
	if hs.ps != nil {
		hs.ps.Close()
	}
	if hs.fs != nil {
		hs.fs.Close()
	}
	if hs.fsSrv != nil {
		hs.fsSrv.Close()
	}
}

// serveKeys serves the development issuer's key set with the harness's two
// extra keys added.
func (hs *harness) serveKeys(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	hs.issuer.Handler().ServeHTTP(rec, r)
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(rec.Body.Bytes(), &set); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	set.Keys = append(set.Keys,
		jose.JSONWebKey{Key: hs.ecKey.Public(), KeyID: "test-es", Algorithm: string(jose.ES256), Use: "sig"},
		jose.JSONWebKey{Key: hs.rsaKey.Public(), KeyID: "test-rs", Algorithm: string(jose.RS256), Use: "sig"})
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(set)
}

// publishReactor fails the Publish requests carrying an event of a tenant
// in failPublish, with a code the publisher does not retry.
type publishReactor struct{ hs *harness }

func (p publishReactor) React(req any) (bool, any, error) {
	r, ok := req.(*pubsubpb.PublishRequest)
	if !ok {
		return false, nil, nil
	}
	p.hs.failMu.Lock()
	defer p.hs.failMu.Unlock()
	for _, m := range r.GetMessages() {
		if t := m.GetAttributes()["tenantId"]; p.hs.failPublish[t] {
			p.hs.publishFailures[t]++
			return true, &pubsubpb.PublishResponse{}, status.Error(codes.PermissionDenied, "publishing is failing (test)")
		}
	}
	return false, nil, nil
}

// commitReactor fails the commits that write a document of a tenant in
// failCommit.
type commitReactor struct{ hs *harness }

func (c commitReactor) React(req any) (bool, any, error) {
	r, ok := req.(*firestorepb.CommitRequest)
	if !ok {
		return false, nil, nil
	}
	c.hs.failMu.Lock()
	defer c.hs.failMu.Unlock()
	for _, w := range r.GetWrites() {
		name := w.GetUpdate().GetName() + w.GetDelete()
		for tenant, code := range c.hs.failCommit {
			if strings.Contains(name, "/documents/tenants/"+tenant+"/") {
				return true, nil, status.Error(code, "commit failing (test)")
			}
		}
	}
	return false, nil, nil
}

// setFailCommit makes the commits of a tenant fail with code, or succeed
// again with codes.OK.
func (hs *harness) setFailCommit(tenantID string, code codes.Code) {
	hs.failMu.Lock()
	defer hs.failMu.Unlock()
	if code == codes.OK {
		delete(hs.failCommit, tenantID)
		return
	}
	hs.failCommit[tenantID] = code
}

func (hs *harness) setFailPublish(tenantID string, fail bool) {
	hs.failMu.Lock()
	defer hs.failMu.Unlock()
	hs.failPublish[tenantID] = fail
}

func (hs *harness) publishFailureCount(tenantID string) int {
	hs.failMu.Lock()
	defer hs.failMu.Unlock()
	return hs.publishFailures[tenantID]
}

// recordingKicker records reconcile kicks and fails them while fail is set.
type recordingKicker struct {
	mu    sync.Mutex
	kicks []chain.Kick
	fail  map[string]bool // by tenant
}

func (k *recordingKicker) Kick(ctx context.Context, kick chain.Kick) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fail[kick.TenantID] {
		return errors.New("kick failing (test)")
	}
	k.kicks = append(k.kicks, kick)
	return nil
}

func (k *recordingKicker) setFail(tenantID string, fail bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fail == nil {
		k.fail = map[string]bool{}
	}
	k.fail[tenantID] = fail
}

// kicksOf returns the kicks recorded for a cluster, oldest first.
func (k *recordingKicker) kicksOf(clusterID string) []chain.Kick {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []chain.Kick
	for _, kick := range k.kicks {
		if kick.ID == clusterID {
			out = append(out, kick)
		}
	}
	return out
}

// Principals of every tenant made by newTenant.
const (
	admin   = "alice"   // kubernetes.admin on the tenant
	editor  = "erin"    // kubernetes.editor on the tenant
	viewer  = "bob"     // kubernetes.viewer on the tenant
	scoped  = "carol"   // kubernetes.editor on one cluster only (bindCluster)
	nobody  = "mallory" // no binding anywhere
	foreign = "gina"    // kubernetes.admin on the other tenant only
)

// tenant is a fresh tenant of one test, with a provider pool on the gcp
// account and one on the baremetal account, and a second tenant ("globex")
// with its own pool and admin.
type tenant struct {
	ID        string
	Pool      string // on acc-gcp (us-central1, europe-west4)
	Pool2     string // another pool on acc-gcp
	MetalPool string // on acc-metal (no managed Kubernetes)
	Other     string // the other tenant
	OtherPool string
}

func newTenant(t testing.TB) tenant {
	t.Helper()
	n := h.seq.Add(1)
	id := fmt.Sprintf("acme-%d-%d", time.Now().UnixNano()%1e6, n)
	tn := tenant{
		ID: id, Pool: id + "-dev", Pool2: id + "-dev2", MetalPool: id + "-metal",
		Other: id + "-globex", OtherPool: id + "-globex-dev",
	}
	seed := &store.Seed{
		Pools: []store.Pool{
			{ID: tn.Pool, TenantID: tn.ID, AccountID: "acc-gcp"},
			{ID: tn.Pool2, TenantID: tn.ID, AccountID: "acc-gcp"},
			{ID: tn.MetalPool, TenantID: tn.ID, AccountID: "acc-metal"},
			{ID: tn.OtherPool, TenantID: tn.Other, AccountID: "acc-gcp"},
		},
		RoleBindings: []auth.Binding{
			{TenantID: tn.ID, Principal: admin, Role: auth.RoleAdmin},
			{TenantID: tn.ID, Principal: editor, Role: auth.RoleEditor},
			{TenantID: tn.ID, Principal: viewer, Role: auth.RoleViewer},
			{TenantID: tn.Other, Principal: foreign, Role: auth.RoleAdmin},
		},
	}
	if err := h.store.LoadSeed(context.Background(), seed); err != nil {
		t.Fatalf("LoadSeed: %v", err)
	}
	return tn
}

// bind adds role bindings (e.g. one on a single cluster) to the tenant,
// replacing the principal's member document.
func bind(t testing.TB, bindings ...auth.Binding) {
	t.Helper()
	if err := h.store.LoadSeed(context.Background(), &store.Seed{RoleBindings: bindings}); err != nil {
		t.Fatalf("LoadSeed(bindings): %v", err)
	}
}

// token returns a valid token for sub.
func token(t testing.TB, sub string) string {
	t.Helper()
	tok, err := h.issuer.Token(sub, audience, time.Hour)
	if err != nil {
		t.Fatalf("Token(%q): %v", sub, err)
	}
	return tok
}

// response is an API answer.
type response struct {
	Status  int
	Header  http.Header
	Body    []byte
	Code    string   // error.code, "" on success
	Fields  []string // error.details[].field, sorted
	Message string
	// OutcomeUnknown: an UNAVAILABLE whose one detail is the reason
	// OUTCOME_UNKNOWN.
	OutcomeUnknown bool
}

func (r response) String() string {
	return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Body))
}

// decode decodes a successful answer into v.
func (r response) decode(t testing.TB, v any) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("answer %v, want 200", r)
	}
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s into %T: %v", r.Body, v, err)
	}
}

// call POSTs body (JSON-encoded unless it is a string or []byte) to
// /api/compute/{method} as principal ("" for no Authorization header).
func call(t testing.TB, principal, method string, body any) response {
	t.Helper()
	auth := ""
	if principal != "" {
		auth = "Bearer " + token(t, principal)
	}
	return do(t, http.MethodPost, method, auth, body, nil)
}

// do sends one request with the given Authorization header and extra
// headers.
func do(t testing.TB, httpMethod, method, authorization string, body any, header http.Header) response {
	t.Helper()
	r, err := send(httpMethod, method, authorization, body, header)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// send is do for goroutines other than the test's: it returns what went
// wrong instead of failing the test.
func send(httpMethod, method, authorization string, body any, header http.Header) (response, error) {
	var b []byte
	switch v := body.(type) {
	case nil:
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return response{}, fmt.Errorf("marshal body: %w", err)
		}
	}
	req, err := http.NewRequest(httpMethod, h.url+"/api/compute/"+method, bytes.NewReader(b))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	res, err := h.http.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", httpMethod, method, err)
	}
	defer res.Body.Close()
	out := response{Status: res.StatusCode, Header: res.Header}
	if out.Body, err = io.ReadAll(res.Body); err != nil {
		return response{}, fmt.Errorf("read answer of %s: %w", method, err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		return out, fmt.Errorf("%s answered %d with Content-Type %q, want application/json", method, res.StatusCode, ct)
	}
	if res.StatusCode == http.StatusOK {
		return out, nil
	}
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Details []struct {
				Field  string `json:"field"`
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(out.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return out, fmt.Errorf("%s answered %d with a body that is not the error envelope: %s (%v)", method, res.StatusCode, out.Body, err)
	}
	if env.Error.Code == "" || env.Error.Message == "" {
		return out, fmt.Errorf("%s answered %d with an envelope without code or message: %s", method, res.StatusCode, out.Body)
	}
	out.Code, out.Message = env.Error.Code, env.Error.Message
	for _, d := range env.Error.Details {
		if d.Field == "" && d.Reason == "OUTCOME_UNKNOWN" && env.Error.Code == "UNAVAILABLE" {
			out.OutcomeUnknown = true
			continue
		}
		if d.Field == "" || d.Reason == "" {
			return out, fmt.Errorf("%s answered a detail without field or reason: %s", method, out.Body)
		}
		out.Fields = append(out.Fields, d.Field)
	}
	slices.Sort(out.Fields)
	return out, nil
}

// wantError fails unless r is the error status and code, and, when fields
// is not nil, names exactly those fields in its details.
func wantError(t testing.TB, r response, status int, code string, fields ...string) {
	t.Helper()
	if r.Status != status || r.Code != code {
		t.Fatalf("answer %v, want %d %s", r, status, code)
	}
	if fields == nil {
		return
	}
	want := slices.Clone(fields)
	slices.Sort(want)
	if !slices.Equal(r.Fields, want) {
		t.Fatalf("details fields = %q, want %q (answer %v)", r.Fields, want, r)
	}
}

// obj is a JSON object body.
type obj = map[string]any

// with returns a copy of base with the given members set (a nil value
// deletes the member; use jsonNull for an explicit null).
func with(base obj, kv ...any) obj {
	out := make(obj, len(base)+len(kv)/2)
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		if kv[i+1] == nil {
			delete(out, k)
			continue
		}
		out[k] = kv[i+1]
	}
	return out
}

// jsonNull marshals as null.
var jsonNull = json.RawMessage("null")

// poolSpec is a minimal valid node pool spec.
func poolSpec(name string) obj {
	return obj{"name": name, "machineType": "e2-standard-4", "nodeCount": 1}
}

// standardCluster is the body of a standard cluster in us-central1 with one
// node pool named "default".
func standardCluster(tn tenant, name string) obj {
	return obj{
		"tenantId": tn.ID, "poolId": tn.Pool, "name": name, "mode": "standard",
		"region": "us-central1", "nodePools": []any{poolSpec("default")},
	}
}

// createCluster creates a cluster as the tenant's admin.
func createCluster(t testing.TB, body obj) resource.Cluster {
	t.Helper()
	var c resource.Cluster
	call(t, admin, "kubernetesClusters/create", body).decode(t, &c)
	return c
}

// newCluster creates a standard cluster with one pool, "default".
func newCluster(t testing.TB, tn tenant) resource.Cluster {
	t.Helper()
	return createCluster(t, standardCluster(tn, fmt.Sprintf("c%d", h.seq.Add(1))))
}

// createBody is a valid kubernetesNodePools.create body.
func createBody(tn tenant, clusterID, name string) obj {
	return with(poolSpec(name), "tenantId", tn.ID, "clusterId", clusterID)
}

// createPool creates a node pool as the tenant's admin.
func createPool(t testing.TB, tn tenant, clusterID string, body obj) resource.NodePool {
	t.Helper()
	var p resource.NodePool
	call(t, admin, "kubernetesNodePools/create", with(body, "tenantId", tn.ID, "clusterId", clusterID)).decode(t, &p)
	return p
}

// setState records the state of a stored cluster or node pool as its
// writer would: deleting as the API's delete does (in the spec), the other
// states as the reconciler does (in the status, answering the spec's
// generation; deleted also inactive).
func setState(t testing.TB, ref *firestore.DocumentRef, st resource.State, msg string) {
	t.Helper()
	ctx := context.Background()
	snap, err := ref.Get(ctx)
	if err != nil {
		t.Fatalf("Get(%s): %v", ref.Path, err)
	}
	gen, err := snap.DataAt("spec.generation")
	if err != nil {
		t.Fatalf("Get(%s): %v", ref.Path, err)
	}
	updates := []firestore.Update{
		{Path: "status.state", Value: string(st)},
		{Path: "status.message", Value: msg},
		{Path: "status.observedGeneration", Value: gen},
	}
	switch st {
	case resource.StateDeleting:
		updates = []firestore.Update{{Path: "spec.deleting", Value: true}}
	case resource.StateDeleted:
		updates = append(updates, firestore.Update{Path: "active", Value: false})
	}
	if _, err := ref.Update(ctx, updates); err != nil {
		t.Fatalf("Update(%s): %v", ref.Path, err)
	}
}

// storedCluster is a cluster as stored: its view, and what tests check
// beside it.
type storedCluster struct {
	resource.Cluster
	ActivePoolCount int
	// Changed: the tenant changed the cluster or a pool since the
	// reconciler last looked.
	Changed   bool
	Reconcile chain.State
}

// clusterDoc reads the stored cluster.
func clusterDoc(t testing.TB, tenantID, clusterID string) storedCluster {
	t.Helper()
	snap, err := h.store.ClusterRef(tenantID, clusterID).Get(context.Background())
	if err != nil {
		t.Fatalf("get cluster %s: %v", clusterID, err)
	}
	var c struct {
		model.Cluster
		Reconcile chain.State `firestore:"reconcile"`
	}
	if err := snap.DataTo(&c); err != nil {
		t.Fatalf("decode cluster %s: %v", clusterID, err)
	}
	return storedCluster{
		Cluster:         c.View(),
		ActivePoolCount: model.ActiveNodePools(&c.Cluster),
		Changed:         c.Spec.Generation > c.Status.ObservedGeneration,
		Reconcile:       c.Reconcile,
	}
}

// poolDocs returns the number of node pool documents of a cluster.
func poolDocs(t testing.TB, tenantID, clusterID string) int {
	t.Helper()
	docs, err := h.store.ClusterRef(tenantID, clusterID).Collection("nodePools").Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatalf("list node pool documents: %v", err)
	}
	return len(docs)
}

// tenantDocs returns the paths of every document of a collection under
// the tenant (clusters, outbox, idempotency, ...).
func tenantDocs(t testing.TB, tenantID, collection string) []string {
	t.Helper()
	docs, err := h.fs.Collection("tenants").Doc(tenantID).Collection(collection).Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatalf("list %s of %s: %v", collection, tenantID, err)
	}
	var out []string
	for _, d := range docs {
		out = append(out, d.Ref.ID)
	}
	return out
}

// unknownCluster is a well-formed cluster ID that names nothing.
func unknownCluster() string { return resource.NewClusterID() }

// unknownNodePool is a well-formed node pool ID that names nothing.
func unknownNodePool() string { return resource.NewNodePoolID() }

// repeat returns s n times.
func repeat(s string, n int) string { return strings.Repeat(s, n) }

// noKubernetes is a connector that reaches no cluster.
type noKubernetes struct{}

func (noKubernetes) Connect(t substrates.Target) (substrates.KubeAPI, error) {
	return nil, fmt.Errorf("no Kubernetes API at %s in these tests", t.Endpoint)
}

// offsetClock is the real clock moved by an offset (nanoseconds): the
// issuer's, which mints an expired or not yet valid token while the other
// tests' tokens are valid now.
type offsetClock struct{ offset *atomic.Int64 }

func (c offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// The API's store is the store.
var _ api.Store = (*store.Store)(nil)
