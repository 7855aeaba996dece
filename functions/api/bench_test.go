package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/functions/api"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/auth/devissuer"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/join"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/outbox"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/substrates"
)

// rpcCounter counts the Firestore RPCs a client makes, by method.
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *rpcCounter) add(method string) {
	c.mu.Lock()
	c.n[method[strings.LastIndex(method, "/")+1:]]++
	c.mu.Unlock()
}

func (c *rpcCounter) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.n
	c.n = map[string]int{}
	return old
}

func total(m map[string]int) int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}

func describe(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return b.String()
}

// The node pool methods through their handlers, on a Firestore client
// that counts its RPCs: what each costs in Firestore, and what the handler
// adds to the bare transaction.

// benchEnv is a Firestore emulator, a counted client, a store seeded with
// a tenant and a standard cluster, and the API's handlers. The join
// method's connector (noKubernetes) is never called by the node pool
// methods these benchmarks time.
type benchEnv struct {
	fs      *firestore.Client
	calls   *rpcCounter
	store   *store.Store
	routes  map[string]http.Handler
	token   string
	cluster string
}

type nopEvents struct{}

func (nopEvents) Send([]event.Event) {}

type nopKicker struct{}

func (nopKicker) Kick(context.Context, chain.Kick) error { return nil }

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	b.Cleanup(func() { slog.SetDefault(prev) })
	ctx := context.Background()
	srv, err := fsemu.NewServer()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	calls := &rpcCounter{n: map[string]int{}}
	conn, err := grpc.NewClient(srv.Addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			calls.add(method)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			calls.add(method)
			return streamer(ctx, desc, cc, method, opts...)
		}))
	if err != nil {
		b.Fatal(err)
	}
	fs, err := firestore.NewClient(ctx, "bench", option.WithGRPCConn(conn))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fs.Close() })
	st, err := store.New(fs, lifecycle.Rules{})
	if err != nil {
		b.Fatal(err)
	}
	seed := &store.Seed{
		Accounts: []store.Account{{ID: "acc", Provider: "gcp", Project: "p", Regions: map[string][]string{"us-central1": {"us-central1-a", "us-central1-b"}}}},
		Pools:    []store.Pool{{ID: "pool", TenantID: "acme", AccountID: "acc"}},
		RoleBindings: []auth.Binding{
			{TenantID: "acme", Principal: "alice", Role: auth.RoleAdmin},
		},
	}
	if err := st.LoadSeed(ctx, seed); err != nil {
		b.Fatal(err)
	}
	iss, err := devissuer.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { iss.Close() })
	v, err := auth.NewVerifier(ctx, auth.Config{IssuerURL: iss.Issuer.URL(), Audience: iss.Issuer.Audience()})
	if err != nil {
		b.Fatal(err)
	}
	if err := v.Ready(ctx); err != nil {
		b.Fatal(err)
	}
	token, err := iss.Issuer.Token("alice", iss.Issuer.Audience(), time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	joiner, err := join.New(st, noKubernetes{}, nopEvents{})
	if err != nil {
		b.Fatal(err)
	}
	previewer, err := substrates.NewPreviewer(st)
	if err != nil {
		b.Fatal(err)
	}
	routes, err := api.Routes(api.Deps{Auth: v, Store: st, Events: nopEvents{}, Kicker: nopKicker{},
		Previewer: previewer, Joiner: joiner})
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{fs: fs, calls: calls, store: st, routes: map[string]http.Handler{}, token: token}
	for _, r := range routes {
		e.routes[r.Path] = r.Handler
	}
	var c resource.Cluster
	e.call(b, "/api/compute/kubernetesClusters/create", map[string]any{
		"tenantId": "acme", "poolId": "pool", "name": "bench", "mode": "standard", "region": "us-central1",
		"nodePools": []any{map[string]any{"name": "first", "machineType": "e2-standard-4", "nodeCount": 1}},
	}, &c)
	e.cluster = c.ID
	return e
}

// free deletes every pool of the cluster but its first, as a reconcile
// run does once the provider has none: their names and the quota they
// took are free again.
func (e *benchEnv) free(b *testing.B) {
	b.Helper()
	ref := e.store.ClusterRef("acme", e.cluster)
	err := e.fs.RunTransaction(context.Background(), func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if err != nil {
			return err
		}
		var before store.ClusterRun
		if err := snap.DataTo(&before.Cluster); err != nil {
			return err
		}
		if before.Pools, err = e.store.LoadNodePools(chain.NewReader(ctx, tx), ref); err != nil {
			return err
		}
		after := store.ClusterRun{Cluster: before.Cluster.Clone()}
		for _, p := range before.Pools {
			p = p.Clone()
			if p.Spec.Name != "first" {
				lifecycle.NodePoolDeleted(&after.Cluster, &p, time.Now())
			}
			after.Pools = append(after.Pools, p)
		}
		_, _, err = e.store.SaveClusterRun(tx, snap, before, after, nil)
		return err
	})
	if err != nil {
		b.Fatalf("free the cluster's pools: %v", err)
	}
}

func (e *benchEnv) call(b *testing.B, path string, body, out any) {
	b.Helper()
	buf, _ := json.Marshal(body)
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(buf))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.token)
	rec := httptest.NewRecorder()
	e.routes[path].ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("POST %s = %d %s", path, rec.Code, rec.Body)
	}
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRPCsPerCall reports the Firestore RPCs each node pool method
// makes through its handler. The floor for a mutation is one transaction:
// BeginTransaction, one BatchGetDocuments, Commit.
func BenchmarkRPCsPerCall(b *testing.B) {
	e := newBenchEnv(b)
	var seq atomic.Int64
	create := func(b *testing.B) resource.NodePool {
		var p resource.NodePool
		e.call(b, "/api/compute/kubernetesNodePools/create", map[string]any{
			"tenantId": "acme", "clusterId": e.cluster, "name": fmt.Sprintf("p%d", seq.Add(1)),
			"machineType": "e2-standard-4", "nodeCount": 1, "idempotencyKey": fmt.Sprintf("k%d", seq.Load()),
		}, &p)
		return p
	}
	// Each pool made is then deleted as the reconciler would (e.free), so
	// the quota never runs out.
	for _, m := range []string{"create", "list", "update", "delete"} {
		b.Run(m, func(b *testing.B) {
			var rpcs map[string]int
			sum := 0
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				var p resource.NodePool
				if m != "list" && m != "create" {
					p = create(b)
				}
				e.calls.reset()
				b.StartTimer()
				switch m {
				case "create":
					p = create(b)
				case "list":
					e.call(b, "/api/compute/kubernetesNodePools/list", map[string]any{"tenantId": "acme", "clusterId": e.cluster}, nil)
				case "update":
					e.call(b, "/api/compute/kubernetesNodePools/update", map[string]any{"tenantId": "acme", "clusterId": e.cluster, "nodePoolId": p.ID, "nodeCount": 2}, nil)
				case "delete":
					e.call(b, "/api/compute/kubernetesNodePools/delete", map[string]any{"tenantId": "acme", "clusterId": e.cluster, "nodePoolId": p.ID}, nil)
				}
				b.StopTimer()
				rpcs = e.calls.reset()
				sum += total(rpcs)
				if p.ID != "" {
					e.free(b)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(sum)/float64(b.N), "rpcs/op")
			b.Logf("%s: %s", m, describe(rpcs))
		})
	}
}

// BenchmarkCreateOverhead compares a node pool create through its handler
// (decode, token, validation, authorization, transaction, response) with a
// bare Firestore transaction making the same reads and writes. The two run
// alternately, so that the machine's noise hits both alike; it reports the
// median of each and their ratio.
func BenchmarkCreateOverhead(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	var seq atomic.Int64
	cref := e.fs.Collection("tenants").Doc("acme").Collection("clusters").Doc(e.cluster)
	member := e.fs.Collection("tenants").Doc("acme").Collection("members").Doc("alice")
	handler := func() {
		e.call(b, "/api/compute/kubernetesNodePools/create", map[string]any{
			"tenantId": "acme", "clusterId": e.cluster, "name": fmt.Sprintf("h%d", seq.Add(1)),
			"machineType": "e2-standard-4", "nodeCount": 1, "idempotencyKey": fmt.Sprintf("hk%d", seq.Load()),
		}, nil)
	}
	bare := func() {
		n := seq.Add(1)
		name := fmt.Sprintf("b%d", n)
		err := e.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			idem := e.fs.Collection("tenants").Doc("acme").Collection("idempotency").Doc(fmt.Sprintf("bk%d", n))
			nameRef := cref.Collection("nodePoolNames").Doc(name)
			snaps, err := tx.GetAll([]*firestore.DocumentRef{member, cref, nameRef, idem})
			if err != nil {
				return err
			}
			var c model.Cluster
			if err := snaps[1].DataTo(&c); err != nil {
				return err
			}
			id := resource.NewNodePoolID()
			now := time.Now()
			p := model.NodePool{ID: id, TenantID: "acme", ClusterID: e.cluster, CreatedAt: now, Active: true,
				Spec: model.NodePoolSpec{Name: name, MachineType: "e2-standard-4", NodeCount: 1, Version: 1, Generation: 1, UpdatedAt: now}}
			c.Spec.Version++
			c.Spec.PoolsCreated++
			ev := event.ForNodePool(event.NodePoolCreated, p.View(), now)
			for _, err := range []error{
				tx.Create(cref.Collection("nodePools").Doc(id), p),
				tx.Create(nameRef, map[string]any{"id": id}),
				tx.Update(cref, []firestore.Update{{Path: "spec", Value: c.Spec}}),
				tx.Set(idem, map[string]any{"requestHash": "x", "resourceId": id, "expireAt": now}),
				tx.Create(e.fs.Collection("tenants").Doc(ev.TenantID).Collection(outbox.Collection).Doc(ev.ID), ev),
			} {
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	var hs, bs []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		handler()
		hs = append(hs, time.Since(start))
		b.StopTimer()
		e.free(b)
		b.StartTimer()
		start = time.Now()
		bare()
		bs = append(bs, time.Since(start))
		b.StopTimer()
		e.free(b)
		b.StartTimer()
	}
	h, r := median(hs), median(bs)
	b.ReportMetric(float64(h.Microseconds()), "handler-µs")
	b.ReportMetric(float64(r.Microseconds()), "bare-µs")
	b.ReportMetric(float64(h)/float64(r), "ratio")
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
