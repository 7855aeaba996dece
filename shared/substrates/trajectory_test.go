package substrates

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	testingclock "k8s.io/utils/clock/testing"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/kubeapply"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// A run and a preview are one model (Effect) on two worlds: the store on
// the Firestore emulator with the runs' fakes, and the world a preview
// imagines. From the same stored input, with the world moving on between
// two runs the same way (what is on its way ready, what is deleted gone,
// the Nodes of the pools that bcd's objects select joined), they take
// the same actions, run by run, and leave the substrate the same.

// trajEnv is a store whose substrate's runs are driven run by run, with
// the world moved on between two (settle) as the clusters' runs, GKE and
// bcd would.
type trajEnv struct {
	t      *testing.T
	clk    *testingclock.FakeClock
	fs     *firestore.Client
	st     *store.Store
	kube   *kubeAPI
	runner *chain.Runner
	kicks  *kicks
	// taken are the actions of the run in progress.
	taken []string
	pool  string
	ver   int
}

// newTrajEnv is a store with the account acc-gcp (one zone) and the
// tenant's ready cluster kcl_00000000000000000000000001, and a runner of
// the substrates' chains.
func newTrajEnv(t *testing.T, pool string) *trajEnv {
	t.Helper()
	ctx := context.Background()
	e := &trajEnv{t: t, clk: testingclock.NewFakeClock(time.Now().UTC().Truncate(time.Microsecond)), kube: &kubeAPI{}, kicks: &kicks{}, pool: pool}
	e.fs = fsemu.ForTest(t, "trajectories")
	var err error
	if e.st, err = store.New(e.fs, lifecycle.Rules{}, store.WithClock(e.clk)); err != nil {
		t.Fatal(err)
	}
	err = e.st.LoadSeed(ctx, &store.Seed{Accounts: []store.Account{
		{ID: "acc-gcp", Provider: "gcp", Project: "p", Regions: map[string][]string{"us-central1": {"us-central1-a"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := model.Cluster{ID: ownCluster, TenantID: "acme", Active: true,
		Spec: model.ClusterSpec{AccountID: "acc-gcp", Name: "own", Mode: resource.ModeStandard, Region: "us-central1",
			Zones: []string{"us-central1-a"}, Generation: 1},
		Status: model.ClusterStatus{State: resource.StateReady, ObservedGeneration: 1, Endpoint: "203.0.113.1", CACertificate: "Y2E="}}
	if _, err := e.st.ClusterRef("acme", ownCluster).Set(ctx, c); err != nil {
		t.Fatal(err)
	}
	r, err := New(e.st, e.kube, sent{}, e.kicks, Config{Image: "example.com/bcd:1", JoinURL: "https://api.example.com/join"}, WithClock(e.clk))
	if err != nil {
		t.Fatal(err)
	}
	r.trace = func(a Action, in Input) { e.taken = append(e.taken, describe(a, in)) }
	e.runner, err = chain.NewRunner(e.st, &scheduler{}, nopDeliverer{}, chain.Config{
		ConvergingInterval: time.Second, SteadyInterval: time.Minute, LeaseTTL: leaseTTL, Clock: e.clk,
	}, r)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

const ownCluster = "kcl_00000000000000000000000001"

// createPolicy and adoptPolicy are the pool's substrate policies, as the
// edge decodes them (input.PoolUpdated.Want).
func createPolicy() *model.SubstrateSpec {
	return &model.SubstrateSpec{AccountID: "acc-gcp", Mode: resource.SubstrateCreate, Region: "us-central1", ReleaseChannel: "regular"}
}

func adoptPolicy() *model.SubstrateSpec {
	return &model.SubstrateSpec{AccountID: "acc-gcp", Mode: resource.SubstrateAdopt, AdoptClusterID: ownCluster}
}

// event applies the pool's next event: its policy (nil: none) and one
// flavor cpu of machine type and nodes.
func (e *trajEnv) event(policy *model.SubstrateSpec, machine string, nodes int) {
	e.t.Helper()
	e.ver++
	f := flavor("cpu", nodes)
	f.NodePool.MachineType = machine
	ev := store.PoolEvent{TenantID: "acme", PoolID: e.pool, Version: int64(e.ver)}
	if policy != nil {
		want := *policy
		want.PoolVersion, want.Flavors = int64(e.ver), []model.Flavor{f}
		ev.Want = &want
	}
	for _, k := range recordPool(e.t, e.st, ev) {
		_ = e.kicks.Kick(context.Background(), k)
	}
}

// substrate is the pool's substrate that the runs converge now: the one
// being torn down, if any, else the pool's current one.
func (e *trajEnv) substrate() *model.Substrate {
	e.t.Helper()
	subs, err := e.st.ActiveSubstrates(context.Background(), "acme", e.pool)
	if err != nil || len(subs) == 0 {
		e.t.Fatalf("the pool's substrates: %v, %v", subs, err)
	}
	return &subs[0]
}

// input is what a run of the substrate reads now (store.ReadSubstrate).
func (e *trajEnv) input(id string) Input {
	e.t.Helper()
	rd, err := e.st.ReadSubstrate(context.Background(), "acme", id)
	if err != nil || rd == nil {
		e.t.Fatalf("ReadSubstrate = %v, %v", rd, err)
	}
	return Input{Substrate: rd.Substrate, PreviousGone: rd.PreviousGone, Cluster: rd.Cluster, Adopted: rd.Adopted, Pools: rd.Pools}
}

// runs runs the substrate's chain, settling the world before each run,
// until a run takes no action or the substrate is deleted, and returns
// the trajectory.
func (e *trajEnv) runs(id string) []string {
	e.t.Helper()
	ctx := context.Background()
	var out []string
	for range maxPreviewRuns {
		e.settle()
		e.taken = nil
		e.clk.Step(leaseTTL + time.Second)
		snap, err := e.fs.Doc("tenants/acme/substrates/" + id).Get(ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		tok, err := snap.DataAt(chain.Field + ".token")
		if err != nil {
			e.t.Fatal(err)
		}
		if err := e.runner.Run(ctx, chain.Kick{Kind: Kind, TenantID: "acme", ID: id, Token: tok.(string)}, ""); err != nil {
			e.t.Fatalf("Run = %v", err)
		}
		s, err := e.st.Substrate(ctx, "acme", id)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, step(e.taken, s.Status))
		if len(e.taken) == 0 || !s.Active {
			return out
		}
	}
	e.t.Fatalf("the runs did not settle: %v", out)
	return nil
}

// settle moves the world on as the clusters' runs, GKE and bcd would,
// and as a preview does (world.settle): the cluster and its pools ready
// at their generations, those being deleted gone, the Nodes of the ready
// pools registered, and the ones of the pools that bcd's objects select
// joined.
func (e *trajEnv) settle() {
	e.t.Helper()
	ctx := context.Background()
	subs, err := e.st.ActiveSubstrates(ctx, "acme", e.pool)
	if err != nil {
		e.t.Fatal(err)
	}
	var nodes []kubeapply.Node
	for _, s := range subs {
		id := s.ClusterID()
		if id == "" {
			continue
		}
		c, err := e.st.Cluster(ctx, "acme", id)
		if err != nil || c == nil || !c.Active {
			continue
		}
		pools, err := e.st.ActiveNodePools(ctx, "acme", id)
		if err != nil {
			e.t.Fatal(err)
		}
		if c.Spec.Deleting {
			for _, p := range pools {
				e.gone(e.st.NodePoolRef("acme", id, p.ID))
			}
			e.gone(e.st.ClusterRef("acme", id))
			e.kube.Remove(ctx, e.pool)
			continue
		}
		c.Status.State, c.Status.Message, c.Status.ObservedGeneration = resource.StateReady, "", c.Spec.Generation
		c.Status.Endpoint, c.Status.CACertificate = "203.0.113.1", "Y2E="
		e.update(e.st.ClusterRef("acme", id), "status", c.Status)
		for _, p := range pools {
			if p.Spec.Deleting {
				e.gone(e.st.NodePoolRef("acme", id, p.ID))
				continue
			}
			p.Status.State, p.Status.Message, p.Status.ObservedGeneration = resource.StateReady, "", p.Spec.Generation
			e.update(e.st.NodePoolRef("acme", id, p.ID), "status", p.Status)
			if p.Spec.ManagedBy == s.ID {
				for i := range wantedNodes(&p, c) {
					nodes = append(nodes, kubeapply.Node{Name: p.Spec.Name + "/" + strconv.Itoa(i), NodePool: p.Spec.Name})
				}
			}
		}
	}
	e.kube.mu.Lock()
	e.kube.nodes = nodes
	applied, secret := e.kube.applied, e.kube.secret
	e.kube.mu.Unlock()
	if applied == nil || secret == "" {
		return
	}
	for _, s := range subs {
		for _, n := range nodes {
			if !slices.Contains(applied.NodePools, n.NodePool) || s.Spec.Deleting {
				continue
			}
			flavor, _ := FlavorOf(&s, n.NodePool)
			g := store.JoinGrant{TenantID: "acme", SubstrateID: s.ID, PoolID: s.PoolID}
			if _, _, err := e.st.RecordJoin(ctx, HashToken(secret), g, resource.SubstrateNode{Name: n.Name, Flavor: flavor, JoinedAt: e.clk.Now()}); err != nil {
				e.t.Fatalf("RecordJoin(%s) = %v", n.Name, err)
			}
		}
	}
}

func (e *trajEnv) update(ref *firestore.DocumentRef, path string, v any) {
	e.t.Helper()
	if _, err := ref.Update(context.Background(), []firestore.Update{{Path: path, Value: v}}); err != nil {
		e.t.Fatalf("update %s: %v", ref.Path, err)
	}
}

// gone makes a cluster or pool deleted, as its reconciler leaves it.
func (e *trajEnv) gone(ref *firestore.DocumentRef) {
	e.t.Helper()
	if _, err := ref.Update(context.Background(), []firestore.Update{
		{Path: "active", Value: false}, {Path: "status.state", Value: resource.StateDeleted}}); err != nil {
		e.t.Fatalf("delete %s: %v", ref.Path, err)
	}
}

// previewed is the preview's trajectory from in.
func previewed(in Input, zones []string, now time.Time) ([]string, model.Substrate) {
	w := preview(in, zones, now)
	var out []string
	for _, r := range w.runs {
		var taken []string
		for i, a := range r.taken {
			taken = append(taken, describe(a, r.on[i]))
		}
		out = append(out, step(taken, r.d.Substrate.Status))
	}
	return out, w.result()
}

// step is one run of a trajectory: the actions it took, and the state it
// left the substrate in.
func step(taken []string, st model.SubstrateStatus) string {
	s := "[" + strings.Join(taken, "; ") + "] → " + string(st.State)
	if st.Message != "" {
		s += ": " + st.Message
	}
	return s
}

// describe names an action by what it acts on.
func describe(a Action, in Input) string {
	switch a.Kind {
	case CreateCluster:
		return a.Kind + " " + ClusterName(in.Substrate.PoolID)
	case AdoptCluster:
		return a.Kind + " " + in.Substrate.Spec.AdoptClusterID
	case CreateNodePool:
		return a.Kind + " " + a.Name
	case ReplaceNodePool:
		return fmt.Sprintf("%s %s with %s", a.Kind, in.Pools[a.Pool].Spec.Name, a.Name)
	case ResizeNodePool, DeleteNodePool:
		return a.Kind + " " + in.Pools[a.Pool].Spec.Name
	case ApplyObjects:
		if a.Mint {
			return a.Kind + " with a new token"
		}
	}
	return a.Kind
}

func TestRunAndPreviewTrajectories(t *testing.T) {
	cpu := func(pool string) string { return NodePoolName(pool, "cpu") }
	for _, c := range []struct {
		name string
		pool string
		// before brings the pool's substrate to where the case starts
		// (its runs are not compared); event is the pool's event that
		// the case compares the runs of.
		before func(e *trajEnv)
		event  func(e *trajEnv)
		want   []string
	}{
		{"create: the cluster with its pool, then bcd's objects", "pool-gpu", nil,
			func(e *trajEnv) { e.event(createPolicy(), "e2-standard-4", 2) },
			[]string{
				"[createCluster bc-pool-gpu] → provisioning",
				"[applyObjects with a new token] → ready",
				"[] → ready",
			}},
		{"a pool ID that is not a label value: served as any other", "team:gpu", nil,
			func(e *trajEnv) { e.event(createPolicy(), "e2-standard-4", 2) },
			[]string{
				"[createCluster " + ClusterName("team:gpu") + "] → provisioning",
				"[applyObjects with a new token] → ready",
				"[] → ready",
			}},
		{"adopt: the cluster, its pool, then bcd's objects", "pool-gpu", nil,
			func(e *trajEnv) { e.event(adoptPolicy(), "e2-standard-4", 1) },
			[]string{
				"[adoptCluster " + ownCluster + "; createNodePool " + cpu("pool-gpu") + "] → provisioning",
				"[applyObjects with a new token] → ready",
				"[] → ready",
			}},
		{"the policy the substrate has already: nothing to do", "pool-gpu",
			func(e *trajEnv) { e.event(adoptPolicy(), "e2-standard-4", 1) },
			func(e *trajEnv) { e.event(adoptPolicy(), "e2-standard-4", 1) },
			[]string{"[] → ready"}},
		{"another size: resized in place", "pool-gpu",
			func(e *trajEnv) { e.event(adoptPolicy(), "e2-standard-4", 1) },
			func(e *trajEnv) { e.event(adoptPolicy(), "e2-standard-4", 2) },
			[]string{
				"[resizeNodePool " + cpu("pool-gpu") + "] → updating",
				"[] → ready",
			}},
		{"another shape: replaced, without losing capacity", "pool-gpu",
			func(e *trajEnv) { e.event(adoptPolicy(), "e2-standard-4", 1) },
			func(e *trajEnv) { e.event(adoptPolicy(), "n2-standard-8", 1) },
			[]string{
				"[replaceNodePool " + cpu("pool-gpu") + " with " + FlavorPoolName("pool-gpu", "cpu", 2) + "] → updating",
				"[applyObjects] → updating: replacing node pool " + cpu("pool-gpu") + " with " + FlavorPoolName("pool-gpu", "cpu", 2) + ": 0 of 1 nodes joined",
				"[deleteNodePool " + cpu("pool-gpu") + "] → updating",
				"[applyObjects] → ready",
				"[] → ready",
			}},
		{"teardown of a cluster made", "pool-gpu",
			func(e *trajEnv) { e.event(createPolicy(), "e2-standard-4", 1) },
			func(e *trajEnv) { e.event(nil, "e2-standard-4", 1) },
			[]string{
				"[deleteCluster] → deleting",
				"[] → deleted",
			}},
		{"teardown in a cluster adopted", "pool-gpu",
			func(e *trajEnv) { e.event(adoptPolicy(), "e2-standard-4", 1) },
			func(e *trajEnv) { e.event(nil, "e2-standard-4", 1) },
			[]string{
				"[removeObjects; deleteNodePool " + cpu("pool-gpu") + "] → deleting",
				"[removeObjects; releaseCluster] → deleted",
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newTrajEnv(t, c.pool)
			if c.before != nil {
				c.before(e)
				e.runs(e.substrate().ID)
			}
			c.event(e)
			id := e.substrate().ID
			in := e.input(id)
			before := jsonOf(in)
			// The zones a create-mode substrate's cluster gets: the
			// account's (Queries.Plan).
			planned, ps := previewed(in, []string{"us-central1-a"}, e.clk.Now())
			if jsonOf(in) != before {
				t.Errorf("the preview changed its input")
			}
			ran := e.runs(id)
			if !slices.Equal(ran, planned) {
				t.Errorf("the runs and the preview differ:\nruns:    %s\npreview: %s", strings.Join(ran, "\n         "), strings.Join(planned, "\n         "))
			}
			if !slices.Equal(ran, c.want) {
				t.Errorf("the runs:\n%s\nwant:\n%s", strings.Join(ran, "\n"), strings.Join(c.want, "\n"))
			}
			s, err := e.st.Substrate(context.Background(), "acme", id)
			if err != nil {
				t.Fatal(err)
			}
			if s.Active {
				// Joined nodes are counted by the store as they join,
				// in the world after the last run.
				e.settle()
				if s, err = e.st.Substrate(context.Background(), "acme", id); err != nil {
					t.Fatal(err)
				}
			}
			got, want := outcome(s.View()), outcome(ps.View())
			if got != want {
				t.Errorf("the substrate the runs left: %s\nthe preview's: %s", got, want)
			}
		})
	}
}

// outcome is what a trajectory leaves of a substrate that a preview says
// too.
func outcome(v resource.Substrate) string {
	var pools []string
	for _, np := range v.NodePools {
		pools = append(pools, np.Flavor+"="+np.Name+"/"+string(np.State))
	}
	joined := v.JoinedNodes
	if v.State == resource.StateDeleted {
		joined = 0
	}
	return fmt.Sprintf("%s %q pools %v joined %d", v.State, v.Message, pools, joined)
}
