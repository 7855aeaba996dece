package clusters_test

import (
	"context"
	"sync"
	"testing"
	"time"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testingclock "k8s.io/utils/clock/testing"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/clusters"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// schedules records what the runner schedules.
type schedules struct {
	mu   sync.Mutex
	list []scheduledRun
}

type scheduledRun struct {
	k  chain.Kick
	at time.Time
}

func (s *schedules) Schedule(_ context.Context, k chain.Kick, at time.Time, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, scheduledRun{k, at})
	return nil
}

func (s *schedules) of(kind string) []scheduledRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []scheduledRun
	for _, r := range s.list {
		if r.k.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// A cluster's runs, at the default converging pace, look at the operation
// they started a second later, not an interval later, and wake the
// substrate that adopted the cluster when its state changes: once until
// that substrate runs, however many changes come before.
func TestClusterRunsWakeTheirSubstrate(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakeClock(time.Now().UTC().Truncate(time.Microsecond))
	fs := fsemu.ForTest(t, "p")
	g, err := gkeemu.NewServer(gkeemu.WithClock(clk), gkeemu.WithOperationTime(opTime))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	conn, err := grpc.NewClient(g.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	gke, err := container.NewClusterManagerClient(ctx, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gke.Close() })
	st, err := store.New(fs, lifecycle.Rules{}, store.WithClock(clk))
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
	rec, err := clusters.New(st, gke, clusters.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	sched := &schedules{}
	runner, err := chain.NewRunner(st, sched, &eventRecorder{}, chain.Config{
		ConvergingInterval: 30 * time.Second, SteadyInterval: 5 * time.Minute, LeaseTTL: 30 * time.Second, Clock: clk,
	}, rec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.CreateCluster(ctx, auth.User("acme", "alice"), store.CreateClusterRequest{
		PoolID:      "pool",
		Spec:        model.ClusterSpec{Name: "c", Mode: resource.ModeStandard, Region: "us-central1"},
		NodePools:   []model.NodePoolSpec{{Name: "a", MachineType: "e2-standard-4", NodeCount: 1}},
		RequestHash: "h",
	})
	if err != nil {
		t.Fatal(err)
	}
	// A substrate adopted it; its last run was a while ago.
	sub := fs.Doc("tenants/acme/substrates/ksb_1")
	if _, err := sub.Set(ctx, map[string]any{"id": "ksb_1", "tenantId": "acme", "poolId": "pool", "active": true,
		"reconcile": chain.State{Token: "tok", NextAt: clk.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClusterRef("acme", res.Cluster.ID).Update(ctx, []firestore.Update{{FieldPath: firestore.FieldPath{"substrates", "ksb_1"}, Value: "pool"}}); err != nil {
		t.Fatal(err)
	}

	k := *res.Kick
	run := func() {
		t.Helper()
		snap, err := st.ClusterRef("acme", res.Cluster.ID).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := snap.DataAt(chain.Field + ".token")
		k.Token = tok.(string)
		if err := runner.Run(ctx, k, ""); err != nil {
			t.Fatalf("Run = %v", err)
		}
	}
	run() // calls CreateCluster: the cluster goes provisioning
	called := clk.Now()
	next := sched.of(store.ClustersKind)
	if len(next) != 1 || next[0].at.Sub(called) != time.Second {
		t.Fatalf("the cluster's next runs %+v, want one a second after the call", next)
	}
	woken := sched.of(store.SubstratesKind)
	if len(woken) != 1 || woken[0].k.ID != "ksb_1" || !woken[0].at.Equal(called) {
		t.Fatalf("substrate kicks %+v, want one, now", woken)
	}
	// Until the operation is done, and after: the cluster ready, its pool
	// too. The substrate has not run: no second kick.
	for range 12 {
		clk.Step(time.Second)
		run()
	}
	c, err := st.Cluster(ctx, "acme", res.Cluster.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := model.ClusterState(c); st != resource.StateReady {
		t.Fatalf("cluster %s after its operation, want ready", st)
	}
	if woken := sched.of(store.SubstratesKind); len(woken) != 1 {
		t.Errorf("substrate kicks %+v, want the first alone: its run was due", woken)
	}
}
