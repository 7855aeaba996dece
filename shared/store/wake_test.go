package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// substrateDoc is a substrate's document as these tests write it.
type substrateDoc struct {
	model.Substrate
	Reconcile chain.State `firestore:"reconcile"`
}

// putSubstrate stores substrate id of the pool, its chain's next run an
// hour ahead (its last run done), and returns its chain.
func (e *runEnv) putSubstrate(t *testing.T, id string, st resource.State) chain.State {
	t.Helper()
	c := chain.State{Token: "tok-" + id, NextAt: e.clk.Now().Add(time.Hour)}
	d := substrateDoc{Substrate: model.Substrate{ID: id, TenantID: "acme", PoolID: "pool", Active: true,
		Status: model.SubstrateStatus{State: st, ClusterID: e.cluster.ID}}, Reconcile: c}
	if _, err := e.fs.Doc("tenants/acme/substrates/"+id).Set(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return c
}

func (e *runEnv) chainOf(t *testing.T, id string) chain.State {
	t.Helper()
	snap, err := e.fs.Doc("tenants/acme/substrates/" + id).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var d substrateDoc
	if err := snap.DataTo(&d); err != nil {
		t.Fatal(err)
	}
	return d.Reconcile
}

// saveWaking saves after over before and returns the kicks of the
// substrates it woke.
func (e *runEnv) saveWaking(t *testing.T, before, after store.ClusterRun) []chain.Kick {
	t.Helper()
	var kicks []chain.Kick
	err := e.fs.RunTransaction(context.Background(), func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(e.st.ClusterRef("acme", e.cluster.ID))
		if err != nil {
			return err
		}
		_, kicks, err = e.st.SaveClusterRun(tx, snap, before, after, nil)
		return err
	})
	if err != nil {
		t.Fatalf("SaveClusterRun = %v", err)
	}
	return kicks
}

func (e *runEnv) setCluster(t *testing.T, updates ...firestore.Update) {
	t.Helper()
	if _, err := e.st.ClusterRef("acme", e.cluster.ID).Update(context.Background(), updates); err != nil {
		t.Fatal(err)
	}
}

// A cluster's run that changes the state of the cluster or its pools
// wakes the substrate that made it, in the save's transaction, exactly
// once until that substrate runs: a second change before then finds its
// run due and kicks nothing. A run that changes nothing a substrate reads
// wakes none.
func TestSaveClusterRunWakesItsSubstrate(t *testing.T) {
	e := newRunEnv(t)
	e.setCluster(t, firestore.Update{Path: "spec.managedBy", Value: "ksb_1"}, firestore.Update{Path: "spec.managedPool", Value: "pool"})
	old := e.putSubstrate(t, "ksb_1", resource.StateProvisioning)
	e.putSubstrate(t, "ksb_other", resource.StateReady) // not the cluster's

	read := e.run(t)
	after, _ := decide(read, e.clk.Now()) // the cluster and its pool ready
	kicks := e.saveWaking(t, read, after)
	woken := e.chainOf(t, "ksb_1")
	if len(kicks) != 1 || kicks[0].Kind != store.SubstratesKind || kicks[0].ID != "ksb_1" || kicks[0].Token != woken.Token || woken.Token == old.Token {
		t.Fatalf("kicks %+v, substrate's chain %+v; want one kick of ksb_1's new chain", kicks, woken)
	}
	if !woken.NextAt.Equal(e.clk.Now()) {
		t.Errorf("woken chain's next run at %v, want now %v", woken.NextAt, e.clk.Now())
	}
	if other := e.chainOf(t, "ksb_other"); other.Token != "tok-ksb_other" {
		t.Errorf("another substrate's chain was woken: %+v", other)
	}

	// Another change before the substrate ran: its run is due already.
	read = e.run(t)
	after = store.ClusterRun{Cluster: read.Cluster.Clone(), Pools: []model.NodePool{read.Pools[0].Clone()}}
	lifecycle.NodePoolError(&after.Pools[0], "stockout", e.clk.Now())
	if kicks := e.saveWaking(t, read, after); len(kicks) != 0 || e.chainOf(t, "ksb_1").Token != woken.Token {
		t.Errorf("a second change before the substrate's run: kicks %+v, chain %+v; want none, the chain as woken", kicks, e.chainOf(t, "ksb_1"))
	}

	// A save that changes nothing the substrate reads, after it ran.
	e.clk.SetTime(e.clk.Now().Add(time.Second))
	ran := woken
	ran.NextAt = e.clk.Now().Add(30 * time.Second)
	if _, err := e.fs.Doc("tenants/acme/substrates/ksb_1").Update(context.Background(), []firestore.Update{{Path: chain.Field, Value: ran}}); err != nil {
		t.Fatal(err)
	}
	read = e.run(t)
	after = store.ClusterRun{Cluster: read.Cluster.Clone(), Pools: []model.NodePool{read.Pools[0].Clone()}}
	n := 3
	lifecycle.NodePoolNodes(&after.Pools[0], &n)
	if kicks := e.saveWaking(t, read, after); len(kicks) != 0 {
		t.Errorf("a save of a node count woke %+v, want none", kicks)
	}

	// Once it ran, the next change wakes it again.
	read = e.run(t)
	after, _ = decide(read, e.clk.Now())
	if kicks := e.saveWaking(t, read, after); len(kicks) != 1 || kicks[0].Token == woken.Token {
		t.Errorf("a change after the substrate ran: kicks %+v, want one of a new chain", kicks)
	}
}

// A cluster that substrates adopted wakes them as the one that made it.
func TestSaveClusterRunWakesItsAdopters(t *testing.T) {
	e := newRunEnv(t)
	e.putSubstrate(t, "ksb_a", resource.StateProvisioning)
	e.setCluster(t, firestore.Update{FieldPath: firestore.FieldPath{"substrates", "ksb_a"}, Value: "pool"})
	read := e.run(t)
	after, _ := decide(read, e.clk.Now())
	if kicks := e.saveWaking(t, read, after); len(kicks) != 1 || kicks[0].ID != "ksb_a" {
		t.Errorf("kicks %+v, want the adopter's", kicks)
	}
}

// A node that joins a converging substrate wakes it (its replacement may
// wait for the node), once until it runs; one that joins a ready one does
// not.
func TestRecordJoinWakes(t *testing.T) {
	ctx := context.Background()
	e := newRunEnv(t)
	for _, c := range []struct {
		id    string
		state resource.State
		kicks int
	}{{"ksb_c", resource.StateUpdating, 1}, {"ksb_r", resource.StateReady, 0}} {
		e.putSubstrate(t, c.id, c.state)
		g := store.JoinGrant{TenantID: "acme", SubstrateID: c.id, PoolID: "pool"}
		// The token's record, as a run's mint leaves it.
		if _, err := e.fs.Doc("joinTokens/"+store.DocID("hash-"+c.id)).Set(ctx, g); err != nil {
			t.Fatal(err)
		}
		kicks := 0
		for _, node := range []string{"n1", "n2"} {
			_, k, err := e.st.RecordJoin(ctx, "hash-"+c.id, g, resource.SubstrateNode{Name: node, JoinedAt: e.clk.Now()})
			if err != nil {
				t.Fatalf("RecordJoin = %v", err)
			}
			if k != nil {
				kicks++
				if k.ID != c.id || k.Token != e.chainOf(t, c.id).Token {
					t.Errorf("kick %+v, chain %+v", k, e.chainOf(t, c.id))
				}
			}
		}
		if kicks != c.kicks {
			t.Errorf("%s substrate: %d kicks for two joins, want %d", c.state, kicks, c.kicks)
		}
	}
}

// deletings is a substrates' subject whose runs delete their substrate,
// reading and saving through the store as the substrates' reconciler does.
type deletings struct{ st *store.Store }

func (deletings) Kind() string { return store.SubstratesKind }

func (d deletings) Ref(k chain.Kick) *firestore.DocumentRef {
	return d.st.SubstrateRef(k.TenantID, k.ID)
}

func (d deletings) Load(rd *chain.Reader, snap chain.Doc) (chain.Run, error) {
	read, err := d.st.LoadSubstrate(rd, snap)
	return &deleting{st: d.st, read: read}, err
}

// deleting is a substrate's run that deletes it.
type deleting struct {
	st    *store.Store
	read  store.SubstrateRead
	woken []chain.Kick
}

func (*deleting) Plan(context.Context) (chain.Plan, error) {
	return chain.Plan{Outcome: chain.Outcome{Changed: true, Next: chain.Done}}, nil
}

func (*deleting) Act(context.Context, *chain.Lease) (chain.Outcome, error) {
	return chain.Outcome{}, errors.New("a deletion does not act")
}

func (r *deleting) Save(tx chain.Tx, now chain.Doc) ([]event.Event, error) {
	s := r.read.Substrate.Clone()
	s.Active, s.Status.State = false, resource.StateDeleted
	events, woken, err := r.st.SaveSubstrateRun(tx, now, r.read, store.SubstrateLeave{Substrate: s})
	r.woken = woken
	return events, err
}

func (r *deleting) Woken() []chain.Kick { return r.woken }

type scheduledKicks struct{ kicks []chain.Kick }

func (s *scheduledKicks) Schedule(_ context.Context, k chain.Kick, _ time.Time, _ string) error {
	s.kicks = append(s.kicks, k)
	return nil
}

func (s *scheduledKicks) Deliver(_ context.Context, events []event.Event) (int, error) {
	return len(events), nil
}

// The run that deletes a substrate wakes the pool's next one, which
// waits for that, in its save's transaction; the runner kicks it.
func TestSubstrateDeletedWakesTheNext(t *testing.T) {
	ctx := context.Background()
	e := newRunEnv(t)
	e.putSubstrate(t, "ksb_old", resource.StateDeleting)
	e.putSubstrate(t, "ksb_new", resource.StatePending)
	if _, err := e.fs.Doc("tenants/acme/substrates/ksb_new").Update(ctx, []firestore.Update{{Path: "spec.after", Value: "ksb_old"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Doc("tenants/acme/substratePools/pool").Set(ctx, map[string]any{"version": 2, "substrateId": "ksb_new", "last": "ksb_new"}); err != nil {
		t.Fatal(err)
	}
	sched := &scheduledKicks{}
	runner, err := chain.NewRunner(e.st, sched, sched, chain.Config{ConvergingInterval: time.Second, SteadyInterval: time.Minute, LeaseTTL: time.Minute, Clock: e.clk}, deletings{e.st})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Run(ctx, chain.Kick{Kind: store.SubstratesKind, TenantID: "acme", ID: "ksb_old", Token: "tok-ksb_old"}, ""); err != nil {
		t.Fatalf("Run = %v", err)
	}
	next := e.chainOf(t, "ksb_new")
	if len(sched.kicks) != 1 || sched.kicks[0].ID != "ksb_new" || sched.kicks[0].Token != next.Token || next.Token == "tok-ksb_new" {
		t.Errorf("kicks %+v, next substrate's chain %+v; want one kick of its new chain", sched.kicks, next)
	}
}
