package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// lossEnv is a store on an emulator whose faults a test sets: a tenant
// with a standard cluster of one pool.
type lossEnv struct {
	srv     *fsemu.Server
	fs      *firestore.Client
	st      *store.Store
	caller  auth.Principal
	cluster resource.Cluster
	pool    resource.NodePool
}

// newLossEnv starts the env; quick says whether the client's connection
// has the store's DialOption (the deployed functions' case) or not.
func newLossEnv(t *testing.T, quick bool) *lossEnv {
	t.Helper()
	ctx := context.Background()
	srv, err := fsemu.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if quick {
		opts = append(opts, store.DialOption())
	}
	conn, err := grpc.NewClient(srv.Addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := firestore.NewClient(ctx, "loss", option.WithGRPCConn(conn))
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
		RoleBindings: []auth.Binding{{TenantID: "acme", Principal: "alice", Role: auth.RoleAdmin}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &lossEnv{srv: srv, fs: fs, st: st, caller: auth.User("acme", "alice")}
	e.cluster = e.createCluster(t, "c", "").Cluster
	pools, err := st.ListNodePools(ctx, e.caller, e.cluster.ID)
	if err != nil || len(pools) != 1 {
		t.Fatalf("ListNodePools() = %v, %v", pools, err)
	}
	e.pool = pools[0]
	return e
}

func (e *lossEnv) createCluster(t *testing.T, name, key string) store.ClusterResult {
	t.Helper()
	res, err := e.st.CreateCluster(context.Background(), e.caller, store.CreateClusterRequest{
		PoolID:         "pool",
		Spec:           model.ClusterSpec{Name: name, Mode: resource.ModeStandard, Region: "us-central1", ReleaseChannel: "regular"},
		NodePools:      []model.NodePoolSpec{{Name: "a", MachineType: "e2-standard-4", NodeCount: 1}},
		IdempotencyKey: key,
		RequestHash:    "h-" + name,
	})
	if err != nil {
		t.Fatalf("CreateCluster(%s) = %v", name, err)
	}
	return res
}

func (e *lossEnv) createPool(ctx context.Context, name, key string) (store.NodePoolResult, error) {
	return e.st.CreateNodePool(ctx, e.caller, store.CreateNodePoolRequest{
		ClusterID:      e.cluster.ID,
		Spec:           model.NodePoolSpec{Name: name, MachineType: "e2-standard-4", NodeCount: 1},
		IdempotencyKey: key,
		RequestHash:    "h-" + name,
	})
}

// storedPools are the cluster's pools that are not deleted, by name.
func (e *lossEnv) storedPools(t *testing.T) map[string]resource.NodePool {
	t.Helper()
	pools, err := e.st.ListNodePools(context.Background(), e.caller, e.cluster.ID)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]resource.NodePool{}
	for _, p := range pools {
		if _, dup := byName[p.Name]; dup {
			t.Errorf("two pools named %s", p.Name)
		}
		byName[p.Name] = p
	}
	return byName
}

// storedPool is the document of a pool, deleted or not.
func (e *lossEnv) storedPool(t *testing.T, clusterID, id string) model.NodePool {
	t.Helper()
	snap, err := e.st.NodePoolRef("acme", clusterID, id).Get(context.Background())
	if err != nil {
		t.Fatalf("read pool %s: %v", id, err)
	}
	var p model.NodePool
	if err := snap.DataTo(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *lossEnv) receipts(t *testing.T) int {
	t.Helper()
	docs, err := e.fs.Collection("tenants").Doc("acme").Collection("receipts").Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	return len(docs)
}

// outsideTx fails, with code, the calls of an RPC that are not part of a
// transaction: the reading back of a lost commit's outcome.
type outsideTx struct{ code codes.Code }

func (r outsideTx) React(req any) (bool, any, error) {
	switch req := req.(type) {
	case *pb.CommitRequest:
		if len(req.GetTransaction()) > 0 {
			return false, nil, nil
		}
	case *pb.BatchGetDocumentsRequest:
		if req.GetTransaction() != nil || req.GetNewTransaction() != nil {
			return false, nil, nil
		}
	}
	return true, nil, status.Error(r.code, "read-back failed")
}

// inTx fails, with code, the commits of transactions, n times (negative:
// always): a commit that never reaches the database.
type inTx struct {
	code codes.Code
	n    atomic.Int64
}

func (r *inTx) React(req any) (bool, any, error) {
	if c, ok := req.(*pb.CommitRequest); ok && len(c.GetTransaction()) > 0 && r.n.Add(-1) >= 0 {
		return true, nil, status.Error(r.code, "commit failed")
	}
	return false, nil, nil
}

var lostCodes = []codes.Code{codes.Unavailable, codes.DeadlineExceeded}

// TestLostCommitIsStoredAnswer loses the answer of the commit of every
// mutation, after Firestore stored it (UNAVAILABLE, which the client
// library retries into "the transaction has already ended", and
// DEADLINE_EXCEEDED), with and without an idempotency key: each returns
// what it stored, as if nothing had gone wrong, its events and its kick
// included.
func TestLostCommitIsStoredAnswer(t *testing.T) {
	for _, quick := range []bool{true, false} {
		for _, code := range lostCodes {
			t.Run(fmt.Sprintf("quick=%v/%s", quick, code), func(t *testing.T) {
				testLostCommit(t, quick, code)
			})
		}
	}
}

func testLostCommit(t *testing.T, quick bool, code codes.Code) {
	ctx := context.Background()
	e := newLossEnv(t, quick)
	var losses int
	lose := func(t *testing.T) {
		t.Helper()
		e.srv.LoseNext("Commit", 1, code, "answer lost")
		losses++
	}
	lost := func(t *testing.T) {
		t.Helper()
		if n := e.srv.Lost("Commit"); n != losses {
			t.Fatalf("commits whose answer was lost = %d, want %d", n, losses)
		}
		e.srv.RemoveFaults()
	}
	for _, key := range []string{"", "k"} {
		t.Run("create pool key="+key, func(t *testing.T) {
			name := "p" + key
			lose(t)
			res, err := e.createPool(ctx, name, key)
			lost(t)
			if err != nil {
				t.Fatalf("CreateNodePool = %v, want the pool", err)
			}
			stored := e.storedPools(t)[name]
			if res.NodePool.ID == "" || stored.ID != res.NodePool.ID || res.NodePool.State != resource.StatePending {
				t.Errorf("CreateNodePool = %+v, stored %+v; want the stored pool, pending", res.NodePool, stored)
			}
			if len(res.Events) != 1 || res.Events[0].Type != event.NodePoolCreated || res.Kick == nil {
				t.Errorf("events %v, kick %v; want the created event and a kick", res.Events, res.Kick)
			}
			if key != "" {
				again, err := e.createPool(ctx, name, key)
				if err != nil || again.NodePool.ID != res.NodePool.ID {
					t.Errorf("replay = %+v, %v; want pool %s", again.NodePool, err, res.NodePool.ID)
				}
			}
		})
	}
	t.Run("update pool", func(t *testing.T) {
		lose(t)
		res, err := e.st.UpdateNodePool(ctx, e.caller, e.cluster.ID, e.pool.ID, func(s model.NodePoolSpec) (model.NodePoolSpec, error) {
			s.NodeCount = 4
			return s, nil
		})
		lost(t)
		if err != nil {
			t.Fatalf("UpdateNodePool = %v, want the pool", err)
		}
		stored := e.storedPool(t, e.cluster.ID, e.pool.ID)
		if res.NodePool.NodeCount != 4 || stored.Spec.NodeCount != 4 || res.NodePool.Version != stored.Spec.Version || res.Kick == nil {
			t.Errorf("UpdateNodePool = %+v (kick %v), stored %+v; want 4 nodes, the stored version, a kick", res.NodePool, res.Kick, stored.Spec)
		}
	})
	t.Run("delete pool", func(t *testing.T) {
		lose(t)
		res, err := e.st.DeleteNodePool(ctx, e.caller, e.cluster.ID, e.pool.ID)
		lost(t)
		if err != nil {
			t.Fatalf("DeleteNodePool = %v, want the pool deleting", err)
		}
		if stored := e.storedPool(t, e.cluster.ID, e.pool.ID); res.NodePool.State != resource.StateDeleting || !stored.Spec.Deleting || res.Kick == nil {
			t.Errorf("DeleteNodePool = %+v (kick %v), stored deleting %v; want deleting, stored, a kick", res.NodePool, res.Kick, stored.Spec.Deleting)
		}
	})
	var made []resource.Cluster
	for _, key := range []string{"", "k"} {
		t.Run("create cluster key="+key, func(t *testing.T) {
			name := "c2" + key
			lose(t)
			res, err := e.st.CreateCluster(ctx, e.caller, store.CreateClusterRequest{
				PoolID:         "pool",
				Spec:           model.ClusterSpec{Name: name, Mode: resource.ModeStandard, Region: "us-central1", ReleaseChannel: "regular"},
				NodePools:      []model.NodePoolSpec{{Name: "a", MachineType: "e2-standard-4", NodeCount: 1}},
				IdempotencyKey: key,
				RequestHash:    "h",
			})
			lost(t)
			if err != nil {
				t.Fatalf("CreateCluster = %v, want the cluster", err)
			}
			stored, err := e.st.GetCluster(ctx, e.caller, res.Cluster.ID)
			if err != nil || stored.Name != name || len(res.NodePools) != 1 || len(res.Events) != 1 || res.Kick == nil {
				t.Errorf("CreateCluster = %+v, stored %+v, %v; want the stored cluster with its pool, event and kick", res, stored, err)
			}
			made = append(made, res.Cluster)
		})
	}
	t.Run("delete cluster", func(t *testing.T) {
		if len(made) == 0 {
			t.Skip("no cluster made")
		}
		lose(t)
		res, err := e.st.DeleteCluster(ctx, e.caller, made[0].ID)
		lost(t)
		if err != nil {
			t.Fatalf("DeleteCluster = %v, want the cluster deleting", err)
		}
		stored, err := e.st.GetCluster(ctx, e.caller, made[0].ID)
		if err != nil || res.Cluster.State != resource.StateDeleting || stored.State != resource.StateDeleting || res.Kick == nil {
			t.Errorf("DeleteCluster = %+v (kick %v), stored %+v, %v; want deleting, stored, a kick", res.Cluster, res.Kick, stored, err)
		}
	})
}

// TestUnstoredCommitRunsAgain fails the commit of a create before
// Firestore sees it: the call learns that nothing was stored, runs its
// transaction again and answers with the one pool it made. When every
// run's commit fails, the call is UNAVAILABLE, and nothing is stored.
func TestUnstoredCommitRunsAgain(t *testing.T) {
	for _, quick := range []bool{true, false} {
		t.Run(fmt.Sprintf("quick=%v", quick), func(t *testing.T) {
			ctx := context.Background()
			e := newLossEnv(t, quick)
			once := &inTx{code: codes.DeadlineExceeded}
			once.n.Store(1)
			commits := e.srv.Calls("Commit")
			e.srv.AddReactor("Commit", once)
			res, err := e.createPool(ctx, "once", "")
			if err != nil {
				t.Fatalf("CreateNodePool = %v, want the pool", err)
			}
			if stored := e.storedPools(t)["once"]; stored.ID != res.NodePool.ID || res.Kick == nil || len(res.Events) != 1 {
				t.Errorf("CreateNodePool = %+v, stored %+v", res, stored)
			}
			if calls := e.srv.Calls("Commit") - commits; calls != 3 {
				t.Errorf("commits = %d, want 3 (the failed one, the fence, the second run's)", calls)
			}

			e.srv.RemoveFaults()
			always := &inTx{code: codes.DeadlineExceeded}
			always.n.Store(1 << 30)
			e.srv.AddReactor("Commit", always)
			_, err = e.createPool(ctx, "never", "")
			if !errs.Is(err, errs.Unavailable) || unknown(err) {
				t.Errorf("CreateNodePool with every commit failing = %v, want UNAVAILABLE without OUTCOME_UNKNOWN", err)
			}
			if _, ok := e.storedPools(t)["never"]; ok {
				t.Errorf("a pool was stored though every commit failed")
			}
		})
	}
}

// unknown reports whether err is UNAVAILABLE with the detail
// OUTCOME_UNKNOWN.
func unknown(err error) bool {
	var e *errs.Error
	return errors.As(err, &e) && e.Kind == errs.Unavailable && slices.Contains(e.Fields, errs.FieldError{Reason: "OUTCOME_UNKNOWN"})
}

// TestLostCommitUnknowable loses a commit's answer and fails the reading
// back of its receipt: UNAVAILABLE with OUTCOME_UNKNOWN, never INTERNAL.
func TestLostCommitUnknowable(t *testing.T) {
	for _, code := range lostCodes {
		t.Run(code.String(), func(t *testing.T) {
			e := newLossEnv(t, true)
			e.srv.LoseNext("Commit", 1, code, "answer lost")
			e.srv.AddReactor("Commit", outsideTx{codes.PermissionDenied})
			e.srv.AddReactor("BatchGetDocuments", outsideTx{codes.PermissionDenied})
			_, err := e.createPool(context.Background(), "p", "k")
			if !unknown(err) {
				t.Errorf("CreateNodePool = %v, want UNAVAILABLE with OUTCOME_UNKNOWN", err)
			}
		})
	}
}

// TestNoWriteNoReceipt: a mutation that writes writes one receipt in its
// commit; one that decides to write nothing (a delete of a pool deleting
// already, a keyed replay) commits nothing, and writes no receipt.
func TestNoWriteNoReceipt(t *testing.T) {
	ctx := context.Background()
	e := newLossEnv(t, true)
	before := e.receipts(t)
	if _, err := e.st.DeleteNodePool(ctx, e.caller, e.cluster.ID, e.pool.ID); err != nil {
		t.Fatal(err)
	}
	if got := e.receipts(t); got != before+1 {
		t.Errorf("receipts after a delete = %d, want %d", got, before+1)
	}
	commits := e.srv.Calls("Commit")
	if _, err := e.st.DeleteNodePool(ctx, e.caller, e.cluster.ID, e.pool.ID); err != nil {
		t.Fatal(err)
	}
	if got := e.receipts(t); got != before+1 {
		t.Errorf("receipts after a delete of a pool deleting = %d, want %d", got, before+1)
	}
	if got := e.srv.Calls("Commit"); got != commits {
		t.Errorf("a delete of a pool deleting committed %d times, want 0", got-commits)
	}
}

// TestLostCommitPoolEvent loses the answer of the commit of a pool
// event: the event's result (its new substrate and the kick of its
// chain) is returned, not an error that Pub/Sub would redeliver into
// "not newer than the version applied", with no kick.
func TestLostCommitPoolEvent(t *testing.T) {
	for _, code := range lostCodes {
		t.Run(code.String(), func(t *testing.T) {
			ctx := context.Background()
			e := newLossEnv(t, true)
			ev := store.PoolEvent{TenantID: "acme", PoolID: "pool-gpu", Version: 1, Want: &model.SubstrateSpec{
				PoolVersion: 1, AccountID: "acc", Mode: resource.SubstrateAdopt, AdoptClusterID: e.cluster.ID}}
			e.srv.LoseNext("Commit", 1, code, "answer lost")
			res, err := e.st.ApplyPoolEvent(ctx, ev)
			if n := e.srv.Lost("Commit"); n != 1 {
				t.Fatalf("lost answers = %d, want 1", n)
			}
			if err != nil {
				t.Fatalf("ApplyPoolEvent = %v, want its result", err)
			}
			if len(res.Kicks) != 1 {
				t.Fatalf("kicks = %v, want the new substrate's", res.Kicks)
			}
			sub, err := e.st.Substrate(ctx, "acme", res.Kicks[0].ID)
			if err != nil || sub == nil || sub.Spec.PoolVersion != 1 {
				t.Errorf("substrate %s stored = %+v, %v", res.Kicks[0].ID, sub, err)
			}
		})
	}
}

// TestLostCommitJoin loses the answer of the commit of a node's join: the
// joined event and the wake of the converging substrate are returned, and
// the node is stored once.
func TestLostCommitJoin(t *testing.T) {
	for _, code := range lostCodes {
		t.Run(code.String(), func(t *testing.T) {
			ctx := context.Background()
			e := newLossEnv(t, true)
			d := map[string]any{"id": "ksb_1", "tenantId": "acme", "poolId": "pool", "active": true,
				"status":    map[string]any{"state": string(resource.StateUpdating)},
				"reconcile": map[string]any{"token": "tok", "nextAt": time.Now().Add(time.Hour)}}
			if _, err := e.fs.Doc("tenants/acme/substrates/ksb_1").Set(ctx, d); err != nil {
				t.Fatal(err)
			}
			g := store.JoinGrant{TenantID: "acme", SubstrateID: "ksb_1", PoolID: "pool"}
			if _, err := e.fs.Doc("joinTokens/"+store.DocID("hash")).Set(ctx, g); err != nil {
				t.Fatal(err)
			}
			e.srv.LoseNext("Commit", 1, code, "answer lost")
			events, kick, err := e.st.RecordJoin(ctx, "hash", g, resource.SubstrateNode{Name: "n1", JoinedAt: time.Now().UTC()})
			if n := e.srv.Lost("Commit"); n != 1 {
				t.Fatalf("lost answers = %d, want 1", n)
			}
			if err != nil {
				t.Fatalf("RecordJoin = %v, want its events", err)
			}
			if len(events) != 1 || events[0].Type != event.SubstrateNodeJoined || kick == nil {
				t.Errorf("RecordJoin = %v, %v; want the joined event and a wake", events, kick)
			}
			nodes, err := e.fs.Collection("tenants/acme/substrates/ksb_1/nodes").Documents(ctx).GetAll()
			if err != nil || len(nodes) != 1 {
				t.Errorf("nodes stored = %d, %v; want 1", len(nodes), err)
			}
		})
	}
}
