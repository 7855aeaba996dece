package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/functions/api"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/join"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/substrates"
)

// The API when Firestore's answer to a commit is lost (API.md §2,
// "Answers tell the truth"): on a Firestore emulator of its own, whose
// faults no other test's calls consume, with answers checked against
// /openapi.json as the harness's are.

// lossAPI is the API's routes on their own Firestore emulator, with a
// tenant "acme" whose admin is alice, and the events sent and kicks made.
type lossAPI struct {
	srv  *fsemu.Server
	st   *store.Store
	http *http.Client
	url  string
	tok  string

	mu     sync.Mutex
	events []event.Event
	kicks  []chain.Kick
}

func (a *lossAPI) Send(events []event.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, events...)
}

func (a *lossAPI) Kick(_ context.Context, k chain.Kick) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.kicks = append(a.kicks, k)
	return nil
}

// sent returns and forgets the events sent and the kicks made.
func (a *lossAPI) sent() ([]event.Event, []chain.Kick) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, k := a.events, a.kicks
	a.events, a.kicks = nil, nil
	return e, k
}

func newLossAPI(t *testing.T) *lossAPI {
	t.Helper()
	ctx := context.Background()
	srv, err := fsemu.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), store.DialOption())
	if err != nil {
		t.Fatal(err)
	}
	fs, err := firestore.NewClient(ctx, project, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	st, err := store.New(fs, lifecycle.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	err = st.LoadSeed(ctx, &store.Seed{
		Accounts:     []store.Account{{ID: "acc", Provider: "gcp", Project: "p", Regions: map[string][]string{"us-central1": {"us-central1-a"}}}},
		Pools:        []store.Pool{{ID: "pool", TenantID: "acme", AccountID: "acc"}},
		RoleBindings: []auth.Binding{{TenantID: "acme", Principal: admin, Role: auth.RoleAdmin}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The harness's issuer mints the tokens.
	v, err := auth.NewVerifier(ctx, auth.Config{IssuerURL: h.url, Audience: audience})
	if err != nil {
		t.Fatal(err)
	}
	a := &lossAPI{srv: srv, st: st, tok: token(t, admin)}
	joiner, err := join.New(st, noKubernetes{}, a)
	if err != nil {
		t.Fatal(err)
	}
	previewer, err := substrates.NewPreviewer(st)
	if err != nil {
		t.Fatal(err)
	}
	routes, err := api.Routes(api.Deps{Auth: v, Store: st, Events: a, Kicker: a, Timeout: callTimeout, Previewer: previewer, Joiner: joiner})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, r := range routes {
		mux.Handle(r.Path, r.Handler)
	}
	hs := httptest.NewServer(httpapi.Edge(mux))
	t.Cleanup(hs.Close)
	a.url = hs.URL
	a.http = h.http // checks every answer against /openapi.json
	return a
}

// post calls method with body and returns the status and the body.
func (a *lossAPI) post(t *testing.T, method string, body obj) (int, http.Header, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, a.url+"/api/compute/"+method, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.tok)
	res, err := a.http.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, out
}

// ok calls method and decodes its 200 answer into v.
func (a *lossAPI) ok(t *testing.T, method string, body obj, v any) {
	t.Helper()
	code, _, b := a.post(t, method, body)
	if code != http.StatusOK {
		t.Fatalf("%s = %d %s, want 200", method, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func (a *lossAPI) cluster(t *testing.T, name, key string) resource.Cluster {
	t.Helper()
	var c resource.Cluster
	a.ok(t, "kubernetesClusters/create", clusterBody(name, key), &c)
	return c
}

func clusterBody(name, key string) obj {
	b := obj{"tenantId": "acme", "poolId": "pool", "name": name, "mode": "standard", "region": "us-central1",
		"nodePools": []any{poolSpec("default")}}
	if key != "" {
		b["idempotencyKey"] = key
	}
	return b
}

func (a *lossAPI) pools(t *testing.T, clusterID string) map[string]resource.NodePool {
	t.Helper()
	var l struct {
		NodePools []resource.NodePool `json:"nodePools"`
	}
	a.ok(t, "kubernetesNodePools/list", obj{"tenantId": "acme", "clusterId": clusterID}, &l)
	out := map[string]resource.NodePool{}
	for _, p := range l.NodePools {
		if _, dup := out[p.Name]; dup {
			t.Errorf("two pools named %s", p.Name)
		}
		out[p.Name] = p
	}
	return out
}

// TestLostCommitAnswers200 loses the answer of each mutation's commit
// after Firestore stored it, as UNAVAILABLE (which the client library
// retries into "the transaction has already ended") and as
// DEADLINE_EXCEEDED, with and without an idempotency key: each answers
// 200 with what it stored, sends its events and kicks its chain.
func TestLostCommitAnswers200(t *testing.T) {
	for _, code := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded} {
		t.Run(code.String(), func(t *testing.T) {
			a := newLossAPI(t)
			c := a.cluster(t, "c", "")
			a.sent()
			var losses int
			// mutate calls method with body with the next commit's
			// answer lost, and decodes its answer into v.
			mutate := func(t *testing.T, method string, body obj, v any) {
				t.Helper()
				a.srv.LoseNext("Commit", 1, code, "answer lost")
				losses++
				status, _, b := a.post(t, method, body)
				if n := a.srv.Lost("Commit"); n != losses {
					t.Fatalf("answers lost = %d, want %d", n, losses)
				}
				a.srv.RemoveFaults()
				if status != http.StatusOK {
					t.Fatalf("%s with its commit's answer lost = %d %s, want 200", method, status, b)
				}
				if err := json.Unmarshal(b, v); err != nil {
					t.Fatal(err)
				}
			}
			wantSent := func(t *testing.T, events int, subject string) {
				t.Helper()
				ev, kicks := a.sent()
				if len(ev) != events || len(kicks) != 1 || kicks[0].ID != subject {
					t.Errorf("events sent %v, kicks %v; want %d events and a kick of %s", ev, kicks, events, subject)
				}
			}
			for _, key := range []string{"", "k"} {
				t.Run("create pool key="+key, func(t *testing.T) {
					body := with(createBody(tenant{ID: "acme"}, c.ID, "p"+key))
					if key != "" {
						body["idempotencyKey"] = key
					}
					var p resource.NodePool
					mutate(t, "kubernetesNodePools/create", body, &p)
					if stored := a.pools(t, c.ID)["p"+key]; p.ID == "" || stored.ID != p.ID || stored.Version != p.Version {
						t.Errorf("answered %+v, stored %+v", p, stored)
					}
					wantSent(t, 1, c.ID)
					if key != "" {
						var again resource.NodePool
						a.ok(t, "kubernetesNodePools/create", body, &again)
						if again.ID != p.ID {
							t.Errorf("retry with the key = %s, want %s", again.ID, p.ID)
						}
					}
				})
			}
			first := a.pools(t, c.ID)["default"]
			t.Run("update pool", func(t *testing.T) {
				var p resource.NodePool
				mutate(t, "kubernetesNodePools/update", obj{"tenantId": "acme", "clusterId": c.ID, "nodePoolId": first.ID, "nodeCount": 3}, &p)
				stored := a.pools(t, c.ID)["default"]
				if p.NodeCount != 3 || stored.NodeCount != 3 || p.Version != stored.Version || p.Version == first.Version {
					t.Errorf("answered %+v, stored %+v", p, stored)
				}
				wantSent(t, 0, c.ID)
			})
			t.Run("delete pool", func(t *testing.T) {
				var p resource.NodePool
				mutate(t, "kubernetesNodePools/delete", obj{"tenantId": "acme", "clusterId": c.ID, "nodePoolId": first.ID}, &p)
				if stored := a.pools(t, c.ID)["default"]; p.State != resource.StateDeleting || stored.State != resource.StateDeleting {
					t.Errorf("answered %s, stored %s; want deleting", p.State, stored.State)
				}
				wantSent(t, 0, c.ID)
			})
			var made []resource.Cluster
			for _, key := range []string{"", "k"} {
				t.Run("create cluster key="+key, func(t *testing.T) {
					var got resource.Cluster
					mutate(t, "kubernetesClusters/create", clusterBody("c2"+key, key), &got)
					var stored resource.Cluster
					a.ok(t, "kubernetesClusters/get", obj{"tenantId": "acme", "clusterId": got.ID}, &stored)
					if stored.Name != "c2"+key || stored.Version != got.Version {
						t.Errorf("answered %+v, stored %+v", got, stored)
					}
					wantSent(t, 1, got.ID)
					made = append(made, got)
				})
			}
			t.Run("delete cluster", func(t *testing.T) {
				if len(made) == 0 {
					t.Skip("no cluster made")
				}
				var got resource.Cluster
				mutate(t, "kubernetesClusters/delete", obj{"tenantId": "acme", "clusterId": made[0].ID}, &got)
				var stored resource.Cluster
				a.ok(t, "kubernetesClusters/get", obj{"tenantId": "acme", "clusterId": made[0].ID}, &stored)
				if got.State != resource.StateDeleting || stored.State != resource.StateDeleting {
					t.Errorf("answered %s, stored %s; want deleting", got.State, stored.State)
				}
				wantSent(t, 0, made[0].ID)
			})
		})
	}
}

// failTxCommits fails the commits of transactions, n of them (negative:
// every one), before Firestore sees them: lost on their way.
type failTxCommits struct{ n atomic.Int64 }

func (r *failTxCommits) React(req any) (bool, any, error) {
	if c, ok := req.(*firestorepb.CommitRequest); ok && len(c.GetTransaction()) > 0 && r.n.Add(-1) >= 0 {
		return true, nil, status.Error(codes.DeadlineExceeded, "commit lost on its way")
	}
	return false, nil, nil
}

// failOutsideTx fails every call outside a transaction: the reading back
// of a lost commit's outcome.
type failOutsideTx struct{}

func (failOutsideTx) React(req any) (bool, any, error) {
	switch req := req.(type) {
	case *firestorepb.CommitRequest:
		if len(req.GetTransaction()) > 0 {
			return false, nil, nil
		}
	case *firestorepb.BatchGetDocumentsRequest:
		if req.GetTransaction() != nil || req.GetNewTransaction() != nil {
			return false, nil, nil
		}
	}
	return true, nil, status.Error(codes.PermissionDenied, "read-back failed")
}

// TestUnstoredCommitAnswers: a create whose commit never reached
// Firestore is run again and answers 200 with its one pool; when every
// commit fails, 503 UNAVAILABLE, with nothing stored; when the commit's
// answer is lost and its outcome cannot be read back either, 503 with
// the one detail OUTCOME_UNKNOWN. Never 500.
func TestUnstoredCommitAnswers(t *testing.T) {
	a := newLossAPI(t)
	c := a.cluster(t, "c", "")

	once := &failTxCommits{}
	once.n.Store(1)
	a.srv.AddReactor("Commit", once)
	var p resource.NodePool
	a.ok(t, "kubernetesNodePools/create", createBody(tenant{ID: "acme"}, c.ID, "once"), &p)
	if stored := a.pools(t, c.ID)["once"]; stored.ID != p.ID {
		t.Errorf("answered %+v, stored %+v", p, stored)
	}
	a.srv.RemoveFaults()

	always := &failTxCommits{}
	always.n.Store(1 << 30)
	a.srv.AddReactor("Commit", always)
	status, header, b := a.post(t, "kubernetesNodePools/create", createBody(tenant{ID: "acme"}, c.ID, "never"))
	if status != http.StatusServiceUnavailable || header.Get("Retry-After") == "" || bytes.Contains(b, []byte("OUTCOME_UNKNOWN")) {
		t.Errorf("create with every commit failing = %d %s, want 503 UNAVAILABLE with Retry-After, its outcome known", status, b)
	}
	a.srv.RemoveFaults()
	if _, ok := a.pools(t, c.ID)["never"]; ok {
		t.Errorf("a pool was stored though every commit failed")
	}

	for _, code := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded} {
		t.Run(fmt.Sprintf("unknowable %s", code), func(t *testing.T) {
			name := fmt.Sprintf("u%d", code)
			a.srv.LoseNext("Commit", 1, code, "answer lost")
			a.srv.AddReactor("Commit", failOutsideTx{})
			a.srv.AddReactor("BatchGetDocuments", failOutsideTx{})
			status, header, b := a.post(t, "kubernetesNodePools/create", with(createBody(tenant{ID: "acme"}, c.ID, name), "idempotencyKey", "u"+code.String()))
			a.srv.RemoveFaults()
			var env struct {
				Error struct {
					Code    string           `json:"code"`
					Details []map[string]any `json:"details"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &env); err != nil {
				t.Fatal(err)
			}
			want := []map[string]any{{"reason": "OUTCOME_UNKNOWN"}}
			if status != http.StatusServiceUnavailable || env.Error.Code != "UNAVAILABLE" || header.Get("Retry-After") == "" ||
				fmt.Sprint(env.Error.Details) != fmt.Sprint(want) {
				t.Fatalf("answer %d %s, want 503 UNAVAILABLE with details %v", status, b, want)
			}
			// The retry with the key returns the one pool, made or not.
			var p resource.NodePool
			a.ok(t, "kubernetesNodePools/create", with(createBody(tenant{ID: "acme"}, c.ID, name), "idempotencyKey", "u"+code.String()), &p)
			if stored := a.pools(t, c.ID)[name]; stored.ID != p.ID {
				t.Errorf("retry answered %+v, stored %+v", p, stored)
			}
		})
	}
}
