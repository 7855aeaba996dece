package substrates

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testingclock "k8s.io/utils/clock/testing"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/kubeapply"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// The runs of a substrate on the Firestore emulator, through the store,
// with one settable clock and an in-memory Kubernetes API.

// kubeAPI is a cluster's Kubernetes API that holds bcd's objects as the
// last Apply left them. hook, when set, is called by Apply first: a
// non-nil error is Apply's.
type kubeAPI struct {
	mu      sync.Mutex
	applied *kubeapply.Desired
	secret  string
	applies int
	hook    func(kubeapply.Desired) error
	// fail, when set, fails every call, as a cluster unreachable as its
	// account does.
	fail error
	// nodes are the cluster's Nodes.
	nodes []kubeapply.Node
}

// The store is what the reconciler reads and writes through.
var _ Store = (*store.Store)(nil)

func (k *kubeAPI) failure() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fail
}

func (k *kubeAPI) Connect(Target) (KubeAPI, error) { return k, nil }

func (k *kubeAPI) Apply(_ context.Context, d kubeapply.Desired) (kubeapply.Applied, error) {
	if err := k.failure(); err != nil {
		return kubeapply.Applied{}, err
	}
	k.mu.Lock()
	hook := k.hook
	k.mu.Unlock()
	if hook != nil {
		if err := hook(d); err != nil {
			return kubeapply.Applied{}, err
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.applies++
	if d.Token == "" && k.secret == "" {
		return kubeapply.Applied{}, kubeapply.ErrJoinSecretMissing
	}
	if d.Token != "" {
		k.secret = d.Token
	}
	d.Token = ""
	k.applied = &d
	return kubeapply.Applied{}, nil
}

func (k *kubeAPI) Check(_ context.Context, d kubeapply.Desired) (bool, error) {
	if err := k.failure(); err != nil {
		return false, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	d.Token = ""
	return k.applied != nil && reflect.DeepEqual(*k.applied, d) && k.secret != "", nil
}

func (k *kubeAPI) Remove(context.Context, string) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.applied, k.secret = nil, ""
	return true, nil
}

func (k *kubeAPI) Nodes(_ context.Context, pools []string) ([]kubeapply.Node, error) {
	if err := k.failure(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []kubeapply.Node
	for _, n := range k.nodes {
		if slices.Contains(pools, n.NodePool) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (k *kubeAPI) Node(context.Context, string) (kubeapply.Node, error) {
	return kubeapply.Node{}, kubeapply.ErrNodeNotFound
}

func (k *kubeAPI) token() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.secret
}

// scheduler records when the last run scheduled its successor.
type scheduler struct {
	mu   sync.Mutex
	last time.Time
}

func (s *scheduler) Schedule(_ context.Context, _ chain.Kick, at time.Time, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = at
	return nil
}

func (s *scheduler) next() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

type nopDeliverer struct{}

func (nopDeliverer) Deliver(_ context.Context, events []event.Event) (int, error) {
	return len(events), nil
}

const leaseTTL = 30 * time.Second

type runEnv struct {
	clk    *testingclock.FakeClock
	fs     *firestore.Client
	st     *store.Store
	kube   *kubeAPI
	sched  *scheduler
	runner *chain.Runner
	kick   chain.Kick // the consumer's kick of the substrate
	id     string
}

// newRunEnv records a pool whose substrate adopts the tenant's ready
// cluster kcl_00000000000000000000000001, and runs it until it is ready.
func newRunEnv(t *testing.T) *runEnv {
	t.Helper()
	ctx := context.Background()
	e := &runEnv{clk: testingclock.NewFakeClock(time.Now().UTC().Truncate(time.Microsecond)), kube: &kubeAPI{}, sched: &scheduler{}}
	e.fs = fsemu.ForTest(t, "runs")
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
	// The tenant's cluster, as the clusters' runs leave it ready (a
	// fixture, where the store keeps it).
	c := model.Cluster{ID: "kcl_00000000000000000000000001", TenantID: "acme", Active: true,
		Spec: model.ClusterSpec{AccountID: "acc-gcp", Name: "own", Mode: resource.ModeStandard, Region: "us-central1",
			Zones: []string{"us-central1-a"}, Generation: 1},
		Status: model.ClusterStatus{State: resource.StateReady, ObservedGeneration: 1, Endpoint: "203.0.113.1", CACertificate: "Y2E="}}
	if _, err := e.fs.Doc("tenants/acme/clusters/kcl_00000000000000000000000001").Set(ctx, c); err != nil {
		t.Fatal(err)
	}
	k := &kicks{}
	recorded := recordPool(t, e.st, adoptingPool(1, "kcl_00000000000000000000000001", flavor("cpu", 1)))
	if len(recorded) != 1 {
		t.Fatalf("pool event recorded: kicks %v, want the substrate's", recorded)
	}
	e.kick, e.id = recorded[0], recorded[0].ID
	r, err := New(e.st, e.kube, sent{}, k, Config{Image: "example.com/bcd:1", JoinURL: "https://api.example.com/join"}, WithClock(e.clk))
	if err != nil {
		t.Fatal(err)
	}
	e.runner, err = chain.NewRunner(e.st, e.sched, nopDeliverer{}, chain.Config{
		ConvergingInterval: time.Second, SteadyInterval: time.Minute, LeaseTTL: leaseTTL, Clock: e.clk,
	}, r)
	if err != nil {
		t.Fatal(err)
	}
	// Adopt, then make the pool; the pool made ready, apply.
	e.run(t)
	e.run(t)
	e.settle(t)
	e.run(t)
	if s := e.substrate(t); s.Status.State != resource.StateReady || HashToken(e.kube.token()) != s.Status.Token.Hash {
		t.Fatalf("substrate after its runs: %+v; Secret's token %q", s.Status, e.kube.token())
	}
	return e
}

// run runs the substrate's chain once, as Cloud Tasks would deliver it.
func (e *runEnv) run(t *testing.T) {
	t.Helper()
	e.clk.Step(leaseTTL + time.Second)
	if err := e.runner.Run(context.Background(), e.current(t), ""); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// current is the kick with the chain token the substrate holds now.
func (e *runEnv) current(t *testing.T) chain.Kick {
	t.Helper()
	snap, err := e.fs.Doc("tenants/acme/substrates/" + e.id).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := snap.DataAt(chain.Field + ".token")
	if err != nil {
		t.Fatal(err)
	}
	k := e.kick
	k.Token = tok.(string)
	return k
}

// settle makes the cluster and its pools ready at their generations, as
// the clusters' runs would.
func (e *runEnv) settle(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	pools, err := e.st.ActiveNodePools(ctx, "acme", "kcl_00000000000000000000000001")
	if err != nil || len(pools) == 0 {
		t.Fatalf("the substrate's pools: %v, %v", pools, err)
	}
	for _, p := range pools {
		_, err := e.fs.Doc("tenants/acme/clusters/kcl_00000000000000000000000001/nodePools/"+p.ID).Update(ctx, []firestore.Update{
			{Path: "status.state", Value: resource.StateReady}, {Path: "status.observedGeneration", Value: p.Spec.Generation}})
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := e.st.Cluster(ctx, "acme", "kcl_00000000000000000000000001")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Doc("tenants/acme/clusters/kcl_00000000000000000000000001").Update(ctx, []firestore.Update{{Path: "status.observedGeneration", Value: c.Spec.Generation}}); err != nil {
		t.Fatal(err)
	}
}

func (e *runEnv) substrate(t *testing.T) *model.Substrate {
	t.Helper()
	s, err := e.st.Substrate(context.Background(), "acme", e.id)
	if err != nil || s == nil {
		t.Fatalf("substrate %s: %v, %v", e.id, s, err)
	}
	return s
}

func (e *runEnv) updated(t *testing.T) time.Time {
	t.Helper()
	snap, err := e.fs.Doc("tenants/acme/substrates/" + e.id).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap.UpdateTime
}

// takeLease writes another run's lease on the substrate, unexpired.
func (e *runEnv) takeLease(t *testing.T) {
	t.Helper()
	_, err := e.fs.Doc("tenants/acme/substrates/"+e.id).Update(context.Background(), []firestore.Update{
		{Path: chain.Field + ".leaseOwner", Value: "another"}, {Path: chain.Field + ".leaseExpiry", Value: e.clk.Now().Add(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
}

// A ready substrate's run confirms by reading only: it writes nothing.
func TestRunSteady(t *testing.T) {
	e := newRunEnv(t)
	e.run(t) // hands the chain to a steady one
	before, applies := e.updated(t), e.kube.applies
	e.run(t)
	if after := e.updated(t); !after.Equal(before) || e.kube.applies != applies {
		t.Errorf("a steady run wrote the substrate (updated %v, then %v) or applied (%d, then %d)", before, after, applies, e.kube.applies)
	}
}

// A task of an older chain ends quietly and changes nothing.
func TestRunStaleToken(t *testing.T) {
	e := newRunEnv(t)
	e.kube.Remove(context.Background(), "pool-gpu") // a run would apply again
	before := e.updated(t)
	stale := e.kick
	stale.Token = "0123456789abcdef01234567"
	if err := e.runner.Run(context.Background(), stale, ""); err != nil {
		t.Errorf("Run of a stale task = %v, want nil", err)
	}
	if after := e.updated(t); !after.Equal(before) || e.kube.token() != "" {
		t.Errorf("a stale task changed the substrate (updated %v, then %v) or applied", before, after)
	}
}

// A run that must act while another run holds the lease acts not, and
// asks for its task again.
func TestRunBusy(t *testing.T) {
	e := newRunEnv(t)
	e.kube.Remove(context.Background(), "pool-gpu")
	token := e.substrate(t).Status.Token
	e.takeLease(t)
	if err := e.runner.Run(context.Background(), e.current(t), ""); !errors.Is(err, chain.ErrBusy) {
		t.Errorf("Run while another holds the lease = %v, want ErrBusy", err)
	}
	if s := e.substrate(t); s.Status.Token != token || e.kube.token() != "" {
		t.Errorf("a busy run minted or applied: token %+v, then %+v; Secret %q", token, s.Status.Token, e.kube.token())
	}
}

// A run that lost its lease before it recorded a new token stops: no
// token is recorded or put in the Secret.
func TestRunLeaseLost(t *testing.T) {
	e := newRunEnv(t)
	ctx := context.Background()
	token := e.substrate(t).Status.Token
	// The Secret is emptied: the run applies, finds it missing and must
	// mint. Meanwhile its lease expires and another run takes it.
	e.kube.Remove(ctx, "pool-gpu")
	e.kube.applied = &kubeapply.Desired{}
	e.kube.hook = func(d kubeapply.Desired) error {
		e.kube.hook = nil
		e.clk.Step(leaseTTL + time.Second)
		e.takeLease(t)
		return nil
	}
	if err := e.runner.Run(ctx, e.current(t), ""); !errors.Is(err, chain.ErrLeaseLost) {
		t.Fatalf("Run = %v, want ErrLeaseLost", err)
	}
	if s := e.substrate(t); s.Status.Token != token || e.kube.token() != "" {
		t.Errorf("a run without its lease minted: token %+v, then %+v; Secret %q", token, s.Status.Token, e.kube.token())
	}
	if g, err := e.st.JoinGrant(ctx, token.Hash); err != nil || g == nil {
		t.Errorf("the old token was revoked by a run without its lease: %v, %v", g, err)
	}
}

// A run killed after it recorded a new token, before the Secret held it,
// leaves a token nobody holds: the next run finds the Secret missing,
// mints again and revokes the unused one.
func TestRunKilledAfterMint(t *testing.T) {
	e := newRunEnv(t)
	ctx := context.Background()
	old := e.substrate(t).Status.Token.Hash
	e.kube.Remove(ctx, "pool-gpu")
	e.kube.hook = func(d kubeapply.Desired) error {
		if d.Token == "" {
			return nil
		}
		e.kube.hook = nil
		return errors.New("killed")
	}
	if err := e.runner.Run(ctx, e.current(t), ""); err != nil {
		t.Fatalf("Run = %v, want the failure recorded for a retry", err)
	}
	unused := e.substrate(t).Status.Token.Hash
	if unused == old || unused == "" || e.kube.token() != "" {
		t.Fatalf("after the killed run: token %q (old %q), Secret %q; want a new token recorded, none in the Secret", unused, old, e.kube.token())
	}
	e.clk.Step(time.Hour) // past the backoff
	e.run(t)
	s := e.substrate(t)
	if s.Status.State != resource.StateReady || s.Status.Token.Hash != HashToken(e.kube.token()) || s.Status.Token.Hash == unused {
		t.Errorf("after the next run: %+v, Secret's token hash %s; want ready with a third token", s.Status, HashToken(e.kube.token()))
	}
	for _, h := range []string{old, unused} {
		if g, err := e.st.JoinGrant(ctx, h); err != nil || g != nil {
			t.Errorf("token %s still valid: %v, %v", h, g, err)
		}
	}
	if g, err := e.st.JoinGrant(ctx, s.Status.Token.Hash); err != nil || g == nil {
		t.Errorf("the Secret's token is unknown: %v, %v", g, err)
	}
}

// The store holds a substrate's node pools to the zone rule of any pool:
// an adopted cluster's flavor in a zone the cluster does not have is
// refused, naming the zone, and nothing is made of it.
func TestRunFlavorZoneRefused(t *testing.T) {
	e := newRunEnv(t)
	ctx := context.Background()
	recordPool(t, e.st, adoptingPool(2, "kcl_00000000000000000000000001", flavor("cpu", 1), flavor("far", 1, "us-central1-b")))
	e.run(t)
	s := e.substrate(t)
	want := "zones[0]: is not a zone of region us-central1 enabled on the account (us-central1-a)"
	if s.Status.State != resource.StateError || !strings.Contains(s.Status.Message, want) {
		t.Errorf("substrate after a flavor outside the cluster's zones: %s %q, want error naming %q", s.Status.State, s.Status.Message, want)
	}
	pools, err := e.st.ActiveNodePools(ctx, "acme", "kcl_00000000000000000000000001")
	if err != nil || len(pools) != 1 {
		t.Errorf("the cluster's pools = %d (%v), want the cpu flavor's only", len(pools), err)
	}
}

// A run that keeps failing (the cluster's Kubernetes API unavailable)
// is retried with backoff, the substrate unchanged, while the failures
// are young; once they have lasted more than lifecycle.RetryShownAfter the
// substrate is in error with the reason, announced once, and the chain
// runs at the steady pace; the first run that succeeds makes it ready
// again and clears the record.
func TestRunRepeatedFailureShowsError(t *testing.T) {
	e := newRunEnv(t)
	ctx := context.Background()
	e.run(t) // hands the chain to a steady one
	unavailable := fmt.Errorf("list the cluster's nodes: %w", apierrors.NewServiceUnavailable("the API server is restarting"))
	e.kube.mu.Lock()
	e.kube.fail = unavailable
	e.kube.mu.Unlock()

	start := e.clk.Now().Add(leaseTTL + time.Second) // the next run's time
	var s *model.Substrate
	for i := 0; ; i++ {
		e.run(t)
		s = e.substrate(t)
		now := e.clk.Now()
		if now.Sub(start) > lifecycle.RetryShownAfter {
			break
		}
		if s.Status.State != resource.StateReady || s.Status.Message != "" {
			t.Fatalf("run %d, %v into the failures: %s %q, want ready as it was", i, now.Sub(start), s.Status.State, s.Status.Message)
		}
		if next := e.sched.next(); next.Sub(now) >= time.Minute {
			t.Errorf("run %d: next run in %v, want a backoff shorter than the steady interval", i, next.Sub(now))
		}
	}
	want := "the API server is restarting"
	if s.Status.State != resource.StateError || !strings.Contains(s.Status.Message, want) {
		t.Fatalf("substrate after failures for over %v: %s %q, want error saying %q", lifecycle.RetryShownAfter, s.Status.State, s.Status.Message, want)
	}
	if next := e.sched.next().Sub(e.clk.Now()); next != time.Minute {
		t.Errorf("next run of a substrate in error in %v, want the steady interval (1m)", next)
	}
	announced := e.errorEvents(t)
	if announced != 1 {
		t.Errorf("kubernetes.substrate.error events = %d, want 1", announced)
	}

	// Failing again the same way changes nothing, at the steady pace.
	before := e.updated(t)
	e.clk.Step(time.Minute)
	e.run(t)
	if after := e.updated(t); !after.Equal(before) || e.errorEvents(t) != announced {
		t.Errorf("another failing run wrote the substrate (updated %v, then %v) or announced again", before, after)
	}
	if next := e.sched.next().Sub(e.clk.Now()); next != time.Minute {
		t.Errorf("next run in %v, want the steady interval", next)
	}

	e.kube.mu.Lock()
	e.kube.fail = nil
	e.kube.mu.Unlock()
	e.clk.Step(time.Minute)
	e.run(t)
	s = e.substrate(t)
	if s.Status.State != resource.StateReady || s.Status.Message != "" || s.Status.Retrying != nil {
		t.Errorf("substrate after a run that succeeded: %s %q, retrying %+v; want ready, no record", s.Status.State, s.Status.Message, s.Status.Retrying)
	}
	if g, err := e.st.JoinGrant(ctx, s.Status.Token.Hash); err != nil || g == nil || HashToken(e.kube.token()) != s.Status.Token.Hash {
		t.Errorf("the Secret's token is not the substrate's after the failures: %v, %v", g, err)
	}
}

// errorEvents counts the kubernetes.substrate.error events in the outbox.
func (e *runEnv) errorEvents(t *testing.T) int {
	t.Helper()
	docs, err := store.TenantDoc(e.fs, "acme").Collection(store.OutboxCollection).Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range docs {
		if typ, _ := d.DataAt("type"); typ == event.SubstrateError {
			n++
		}
	}
	return n
}

// An apply that finds the pool's objects still being deleted (an earlier
// teardown) waits, saying so, at the converging pace: however long it
// lasts, it is no failure.
func TestRunApplyWhileTerminating(t *testing.T) {
	e := newRunEnv(t)
	e.kube.Remove(context.Background(), "pool-gpu")
	e.kube.mu.Lock()
	e.kube.hook = func(kubeapply.Desired) error {
		return fmt.Errorf("apply substrate objects: Namespace better-compute-system: %w", kubeapply.ErrTerminating)
	}
	e.kube.mu.Unlock()
	for range 5 {
		e.clk.Step(lifecycle.RetryShownAfter)
		e.run(t)
		s := e.substrate(t)
		if s.Status.State != resource.StateUpdating || !strings.Contains(s.Status.Message, "earlier teardown") || s.Status.Retrying != nil {
			t.Fatalf("substrate while its objects are being deleted: %s %q, retrying %+v; want updating, waiting", s.Status.State, s.Status.Message, s.Status.Retrying)
		}
		if next := e.sched.next().Sub(e.clk.Now()); next != time.Second {
			t.Errorf("next run in %v, want the converging interval (1s)", next)
		}
	}
	e.kube.mu.Lock()
	e.kube.hook = nil
	e.kube.mu.Unlock()
	e.run(t)
	if s := e.substrate(t); s.Status.State != resource.StateReady || s.Status.Message != "" {
		t.Errorf("substrate once the objects are gone: %s %q, want ready", s.Status.State, s.Status.Message)
	}
}
