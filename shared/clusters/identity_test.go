package clusters_test

import (
	"context"
	"strings"
	"testing"
	"time"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	credentials "cloud.google.com/go/iam/credentials/apiv1"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testingclock "k8s.io/utils/clock/testing"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	iamemu "github.com/better-compute/kubernetes/emulators/iamcredentials"
	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/clusters"
	"github.com/better-compute/kubernetes/shared/impersonate"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

const (
	reconcilerSA  = "reconciler@bc-dev.iam.gserviceaccount.com"
	provisionerSA = "bc-provisioner@tp.iam.gserviceaccount.com"
	tenantNodesSA = "bc-nodes@tp.iam.gserviceaccount.com"
	platformNodes = "nodes@bc-dev.iam.gserviceaccount.com"
	tokenLifetime = 10 * time.Minute
	tokenMargin   = 5 * time.Minute
)

// iamEnv is a reconciler acting as reconcilerSA in the platform project
// p and, through impersonation, as provisionerSA in the tenant's project
// tp, against the GKE simulator with IAM on and the IAM Credentials
// emulator, on one clock.
type iamEnv struct {
	*env
	iam *iamemu.Server
}

func newIAMEnv(t *testing.T, opts ...clusters.Option) *iamEnv {
	t.Helper()
	ctx := context.Background()
	e := &iamEnv{env: &env{clk: testingclock.NewFakeClock(time.Now().UTC().Truncate(time.Microsecond)), caller: auth.User("acme", "alice")}}
	var err error
	if e.iam, err = iamemu.NewServer(iamemu.WithClock(e.clk)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.iam.Close() })
	e.iam.Grant(provisionerSA, reconcilerSA)
	e.fs = fsemu.ForTest(t, "p")
	e.gke, err = gkeemu.NewServer(gkeemu.WithClock(e.clk), gkeemu.WithOperationTime(opTime), gkeemu.WithIAM(gkeemu.IAM{
		Projects: map[string][]string{"p": {reconcilerSA}, "tp": {provisionerSA}},
		Identify: e.iam.Identify,
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.gke.Close() })
	// The reconciler's own identity: a token it presents on every call of
	// its platform client and to the IAM Credentials API.
	own := e.iam.IssueToken(reconcilerSA, 100*time.Hour)
	platform := gkeClient(t, e.gke, own)
	tenants := gkeClient(t, e.gke, "")
	ic, err := credentials.NewIamCredentialsClient(ctx, e.iam.ClientOptions(own)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ic.Close() })
	tokens, err := impersonate.New(ic, impersonate.WithClock(e.clk), impersonate.WithLifetime(tokenLifetime, tokenMargin))
	if err != nil {
		t.Fatal(err)
	}
	if e.st, err = store.New(e.fs, lifecycle.Rules{}, store.WithClock(e.clk)); err != nil {
		t.Fatal(err)
	}
	regions := map[string][]string{"us-central1": {"us-central1-a"}}
	err = e.st.LoadSeed(ctx, &store.Seed{
		Accounts: []store.Account{
			{ID: "acc", Provider: "gcp", Project: "p", Regions: regions},
			{ID: "acc-t", Provider: "gcp", Project: "tp", Regions: regions, Impersonate: provisionerSA, NodeServiceAccount: tenantNodesSA},
		},
		Pools:        []store.Pool{{ID: "pool", TenantID: "acme", AccountID: "acc"}, {ID: "pool-t", TenantID: "acme", AccountID: "acc-t"}},
		RoleBindings: []auth.Binding{{TenantID: "acme", Principal: "alice", Role: auth.RoleAdmin}},
	})
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]clusters.Option{
		clusters.WithNodeServiceAccount(platformNodes),
		clusters.WithImpersonation(clusters.Impersonation{GKE: tenants, Identity: impersonate.Identity{Tokens: tokens, Caller: reconcilerSA}, Insecure: true}),
	}, opts...)
	rec, err := clusters.New(e.st, platform, append([]clusters.Option{clusters.WithClock(e.clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.sched = &kickRecorder{}
	e.runner, err = chain.NewRunner(e.st, e.sched, &eventRecorder{}, chain.Config{
		ConvergingInterval: time.Second, SteadyInterval: time.Minute, LeaseTTL: 30 * time.Second, Clock: e.clk,
	}, rec)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// gkeClient is the official client presenting tok on every call ("":
// none of its own).
func gkeClient(t *testing.T, srv *gkeemu.Server, tok string) *container.ClusterManagerClient {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if tok != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(iamemu.Bearer(tok)))
	}
	conn, err := grpc.NewClient(srv.Addr(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.NewClusterManagerClient(context.Background(), option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// create makes a cluster named name in pool and converges it.
func (e *iamEnv) create(t *testing.T, pool, name string) resource.Cluster {
	t.Helper()
	res, err := e.st.CreateCluster(context.Background(), e.caller, store.CreateClusterRequest{
		PoolID:      pool,
		Spec:        model.ClusterSpec{Name: name, Mode: resource.ModeStandard, Region: "us-central1", ReleaseChannel: "regular"},
		NodePools:   []model.NodePoolSpec{{Name: "a", MachineType: "e2-standard-4", NodeCount: 1}},
		RequestHash: "h-" + name,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.id, e.kick = res.Cluster.ID, *res.Kick
	return e.converge(t)
}

// run makes one run of the current cluster and returns it.
func (e *iamEnv) run(t *testing.T) resource.Cluster {
	t.Helper()
	if err := e.runner.Run(context.Background(), e.current(t, e.kick), ""); err != nil {
		t.Fatalf("Run = %v", err)
	}
	c, err := e.st.GetCluster(context.Background(), e.caller, e.id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Each cluster's calls go out as its account's identity: the platform's
// in the platform project, the impersonated provisioner in the tenant's,
// whose nodes run as the tenant's own nodes' account.
func TestClustersActAsTheirAccount(t *testing.T) {
	e := newIAMEnv(t)
	platform := e.create(t, "pool", "plat")
	tenant := e.create(t, "pool-t", "ten")
	for _, tc := range []struct {
		c       resource.Cluster
		project string
		nodes   string
	}{{platform, "p", platformNodes}, {tenant, "tp", tenantNodesSA}} {
		name := "projects/" + tc.project + "/locations/us-central1/clusters/" + tc.c.ProviderName
		pc, err := e.gke.Cluster(name)
		if err != nil {
			t.Errorf("cluster %s not at the provider in %s: %v", tc.c.ID, tc.project, err)
			continue
		}
		if sa := pc.GetNodePools()[0].GetConfig().GetServiceAccount(); sa != tc.nodes {
			t.Errorf("nodes of %s run as %q, want %q", name, sa, tc.nodes)
		}
	}
	// One token for every call of the tenant's cluster so far.
	if n := e.iam.Calls("GenerateAccessToken"); n != 1 {
		t.Errorf("GenerateAccessToken calls = %d, want 1 (the token is kept)", n)
	}
}

// A tenant who revokes the grant sees its cluster in error, saying what to
// grant; the chain keeps looking at the steady pace and the cluster is
// ready again once the grant is back, with nothing else done.
func TestRevokedGrantShowsGuidanceAndRecovers(t *testing.T) {
	e := newIAMEnv(t)
	e.create(t, "pool-t", "ten")
	e.iam.Revoke(provisionerSA, reconcilerSA)
	// The token minted before the revoke lasts until the margin before
	// its expiry, as a real one does.
	e.clk.Step(tokenLifetime - tokenMargin)
	want := "Better Compute cannot act in project tp: grant roles/iam.serviceAccountTokenCreator on " + provisionerSA + " to " + reconcilerSA
	for range 2 {
		if c := e.run(t); c.State != resource.StateError || c.Message != want {
			t.Fatalf("cluster after the revoke = %s %q, want error %q", c.State, c.Message, want)
		}
	}
	e.iam.Grant(provisionerSA, reconcilerSA)
	if c := e.run(t); c.State != resource.StateReady || c.Message != "" {
		t.Errorf("cluster once granted again = %s %q, want ready", c.State, c.Message)
	}
}

// A provisioner whose roles in the tenant's project are gone is refused
// by the provider: the cluster says so, and recovers once they are back.
func TestProjectRolesRemovedShowGuidanceAndRecover(t *testing.T) {
	e := newIAMEnv(t)
	e.create(t, "pool-t", "ten")
	if err := e.gke.SetProjectIAM("tp"); err != nil {
		t.Fatal(err)
	}
	c := e.run(t)
	if c.State != resource.StateError || !strings.HasPrefix(c.Message, "Better Compute cannot act in project tp as "+provisionerSA+": the provider refused it (Required \"container.clusters.get\"") {
		t.Fatalf("cluster after the roles went = %s %q, want error naming the refusal", c.State, c.Message)
	}
	if err := e.gke.SetProjectIAM("tp", provisionerSA); err != nil {
		t.Fatal(err)
	}
	if c := e.run(t); c.State != resource.StateReady {
		t.Errorf("cluster once the roles are back = %s %q, want ready", c.State, c.Message)
	}
}

// A steady refresh's listing of a tenant's project is made as the
// tenant's account: it confirms the cluster with no GetCluster (a listing
// refused for another identity would make the run look again).
func TestListingActsAsTheAccount(t *testing.T) {
	e := newIAMEnv(t, clusters.WithListing(time.Minute))
	e.create(t, "pool-t", "ten")
	e.clk.Step(2 * time.Minute)
	gets, lists := e.gke.Calls("GetCluster"), e.gke.Calls("ListClusters")
	if c := e.run(t); c.State != resource.StateReady {
		t.Fatalf("cluster after a steady refresh = %s %q", c.State, c.Message)
	}
	if g, l := e.gke.Calls("GetCluster")-gets, e.gke.Calls("ListClusters")-lists; g != 0 || l != 1 {
		t.Errorf("a steady refresh made %d GetCluster and %d ListClusters, want 0 and 1", g, l)
	}
	ops, err := gkeClient(t, e.gke, e.iam.IssueToken(provisionerSA, time.Hour)).ListClusters(context.Background(), &containerpb.ListClustersRequest{Parent: "projects/tp/locations/us-central1"})
	if err != nil || len(ops.GetClusters()) != 1 {
		t.Errorf("ListClusters in tp as the provisioner = %v, %v; want the cluster", ops, err)
	}
}
