package gke

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/googleapis/gax-go/v2/apierror"
	"github.com/googleapis/gax-go/v2/callctx"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"

	"github.com/better-compute/kubernetes/emulators/faults"
)

// computeClient is the official Compute Engine REST client of srv's
// instance groups.
func computeClient(t *testing.T, srv *Server) (*ComputeServer, *compute.InstanceGroupManagersClient) {
	t.Helper()
	cs, err := NewComputeServer(srv, "127.0.0.1:0")
	if err != nil {
		t.Fatalf("NewComputeServer: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	c, err := compute.NewInstanceGroupManagersRESTClient(context.Background(), option.WithEndpoint(cs.URL()), option.WithoutAuthentication())
	if err != nil {
		t.Fatalf("NewInstanceGroupManagersRESTClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return cs, c
}

// group is what a test reads of one instance group.
type group struct{ target, none, creating int32 }

// groups lists project's instance groups with aggregatedList, by zone.
func groups(ctx context.Context, c *compute.InstanceGroupManagersClient, project string) (map[string]group, error) {
	out := map[string]group{}
	it := c.AggregatedList(ctx, &computepb.AggregatedListInstanceGroupManagersRequest{Project: project})
	for {
		pair, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		for _, m := range pair.Value.GetInstanceGroupManagers() {
			z := m.GetZone()[strings.LastIndex(m.GetZone(), "/")+1:]
			out[z] = group{m.GetTargetSize(), m.GetCurrentActions().GetNone(), m.GetCurrentActions().GetCreating()}
		}
	}
}

// The instance groups are those GKE names in instanceGroupUrls, and
// follow the pool's nodes: a stockout's missing nodes are creating, and
// come once the zone has machines again.
func TestComputeInstanceGroupsFollowAStockout(t *testing.T) {
	for _, form := range []struct {
		name   string
		form   StockoutForm
		status containerpb.NodePool_Status
	}{
		{"instances", StockoutInstances, containerpb.NodePool_RUNNING_WITH_ERROR},
		{"capacity", StockoutCapacity, containerpb.NodePool_ERROR},
		{"conditions", StockoutConditions, containerpb.NodePool_RUNNING_WITH_ERROR},
	} {
		t.Run(form.name, func(t *testing.T) { testGroupsFollowAStockout(t, form.form, form.status) })
	}
}

func testGroupsFollowAStockout(t *testing.T, form StockoutForm, status containerpb.NodePool_Status) {
	e := newEnv(t)
	_, cc := computeClient(t, e.srv)
	e.createCluster(t)
	e.srv.StockoutAs(zoneB, 2, form) // the create, then the groups' first retry
	op, err := e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: pool("p1", "e2-standard-4", 3, zoneA, zoneB)})
	if err != nil {
		t.Fatalf("CreateNodePool: %v", err)
	}
	e.wait(t, op)
	np := e.getPool(t, "p1")
	if np.Status != status {
		t.Fatalf("pool status = %v, want %v", np.Status, status)
	}
	got, err := groups(e.ctx, cc, project)
	if err != nil {
		t.Fatalf("AggregatedList: %v", err)
	}
	want := map[string]group{zoneA: {3, 3, 0}, zoneB: {3, 1, 2}}
	// p0 has a group in zone a too: p1's are found by its URLs.
	for _, u := range np.InstanceGroupUrls {
		zone, name, _ := groupOfURL(u)
		m, err := cc.Get(e.ctx, &computepb.GetInstanceGroupManagerRequest{Project: project, Zone: zone, InstanceGroupManager: name})
		if err != nil {
			t.Fatalf("Get(%s): %v", u, err)
		}
		g := group{m.GetTargetSize(), m.GetCurrentActions().GetNone(), m.GetCurrentActions().GetCreating()}
		if g != want[zone] {
			t.Errorf("group %s = %+v, want %+v", name, g, want[zone])
		}
		if m.GetSelfLink() != u {
			t.Errorf("selfLink = %q, want the pool's instanceGroupUrl %q", m.GetSelfLink(), u)
		}
	}
	if g := got[zoneB]; g != want[zoneB] {
		t.Errorf("aggregated zone b = %+v, want %+v", g, want[zoneB])
	}

	// The groups' first retry uses up the stockout's second try.
	e.clock.Step(opTime)
	if np := e.getPool(t, "p1"); np.Status != status {
		t.Fatalf("after one retry, pool status = %v, want %v", np.Status, status)
	}
	e.clock.Step(opTime)
	if np := e.getPool(t, "p1"); np.Status != containerpb.NodePool_RUNNING || np.StatusMessage != "" || len(np.Conditions) != 0 {
		t.Fatalf("after the stockout, pool = %v %q %v, want RUNNING, no message or conditions", np.Status, np.StatusMessage, np.Conditions)
	}
	got, err = groups(e.ctx, cc, project)
	if err != nil {
		t.Fatalf("AggregatedList: %v", err)
	}
	if g := got[zoneB]; g != (group{3, 3, 0}) {
		t.Errorf("zone b after the stockout = %+v, want every node running", g)
	}
	if n, _ := e.srv.NodeCounts(clusterN + "/nodePools/p1"); n[zoneB] != 3 {
		t.Errorf("NodeCounts = %v, want 3 in zone b", n)
	}
}

// The Compute calls are authenticated and authorized as the gRPC ones, and
// can be failed.
func TestComputeIAMAndFaults(t *testing.T) {
	e := iamEnv(t)
	cs, cc := computeClient(t, e.srv)
	as := func(tok string) context.Context {
		if tok == "" {
			return e.ctx
		}
		return callctx.SetHeaders(e.ctx, "authorization", "Bearer "+tok)
	}
	tests := []struct {
		name, token, project string
		wantCode             int
		wantMsg              string
	}{
		{"allowed", "platform", project, 0, ""},
		{"no credential", "", project, http.StatusUnauthorized, "missing required authentication credential"},
		{"unknown token", "forged", project, http.StatusUnauthorized, "invalid authentication credentials"},
		{"another's project", "tenant", project, http.StatusForbidden, "Required 'compute.instanceGroupManagers.list' permission for 'projects/" + project + "'"},
		{"own project", "tenant", "acme-prod", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := groups(as(tt.token), cc, tt.project)
			if tt.wantCode == 0 {
				if err != nil {
					t.Fatalf("AggregatedList: %v, want it served", err)
				}
				return
			}
			ae, ok := errors.AsType[*apierror.APIError](err)
			if !ok || ae.HTTPCode() != tt.wantCode || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("AggregatedList: %v, want HTTP %d with %q", err, tt.wantCode, tt.wantMsg)
			}
		})
	}
	cs.FailNext(ComputeAggregatedList, 1, codes.Unavailable, "backend unavailable")
	if _, err := groups(as("platform"), cc, project); err == nil || !strings.Contains(err.Error(), "backend unavailable") {
		t.Errorf("AggregatedList after FailNext: %v, want the failure", err)
	}
	if _, err := groups(as("platform"), cc, project); err != nil {
		t.Errorf("AggregatedList after the failure: %v", err)
	}
	if n := cs.Calls(ComputeAggregatedList); n != len(tests)+2 {
		t.Errorf("Calls = %d, want %d", n, len(tests)+2)
	}
}

func TestComputeNameFilter(t *testing.T) {
	tests := []struct {
		filter string
		name   string
		keep   bool
		bad    bool
	}{
		{"", "gke-c1-p1-ab-grp", true, false},
		{`name eq "gke-c1-p1-ab-grp|gke-c1-p2-cd-grp"`, "gke-c1-p2-cd-grp", true, false},
		{`name eq "gke-c1-p1-ab-grp"`, "gke-c1-p1-ab-grp-x", false, false},
		{"(name eq gke-c1-.*)", "gke-c1-p1-ab-grp", true, false},
		{"name ne x", "", false, true},
		{`name eq "("`, "", false, true},
	}
	for _, tt := range tests {
		keep, err := nameFilter(tt.filter)
		if (err != nil) != tt.bad {
			t.Errorf("nameFilter(%q) error = %v, want error %v", tt.filter, err, tt.bad)
			continue
		}
		if err == nil && keep(tt.name) != tt.keep {
			t.Errorf("nameFilter(%q)(%q) = %v, want %v", tt.filter, tt.name, !tt.keep, tt.keep)
		}
	}
	// Through the official client.
	e := newEnv(t)
	_, cc := computeClient(t, e.srv)
	e.createCluster(t, pool("p0", "e2-standard-4", 1, zoneA), pool("p1", "e2-standard-4", 1, zoneA))
	np := e.getPool(t, "p1")
	_, name, _ := groupOfURL(np.InstanceGroupUrls[0])
	f := `name eq "` + name + `"`
	it := cc.AggregatedList(e.ctx, &computepb.AggregatedListInstanceGroupManagersRequest{Project: project, Filter: &f})
	var got []string
	for {
		pair, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatalf("AggregatedList(%s): %v", f, err)
		}
		for _, m := range pair.Value.GetInstanceGroupManagers() {
			got = append(got, m.GetName())
		}
	}
	if len(got) != 1 || got[0] != name {
		t.Errorf("AggregatedList(%s) = %v, want only %s", f, got, name)
	}
}

// aggregatedList answers every scope the project sees, as Compute Engine
// does: each region and zone of the catalog, those without groups with
// the warning Compute Engine gives them (recorded in Config Connector's
// mockgcp/mockcompute/testdata/computenetworks/subnetmode-auto/_http.log,
// commit 29e3526e700de6b3e4f74cad1293cc3e95775521, an aggregated list
// against real GCP), and a filter keeps every scope.
func TestComputeAggregatedListScopes(t *testing.T) {
	e := newEnv(t)
	_, cc := computeClient(t, e.srv)
	e.createCluster(t)
	for _, filter := range []string{"", `name eq "nothing-.*"`} {
		req := &computepb.AggregatedListInstanceGroupManagersRequest{Project: project}
		if filter != "" {
			req.Filter = &filter
		}
		it := cc.AggregatedList(e.ctx, req)
		scopes := map[string]bool{}
		for {
			pair, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				t.Fatalf("AggregatedList(%q): %v", filter, err)
			}
			scopes[pair.Key] = true
			groups := pair.Value.GetInstanceGroupManagers()
			w := pair.Value.GetWarning()
			switch {
			case filter == "" && pair.Key == "zones/"+zoneA:
				if len(groups) != 1 || w != nil {
					t.Errorf("%s = %d groups, warning %v; want p0's group", pair.Key, len(groups), w)
				}
			case len(groups) != 0:
				t.Errorf("%s (filter %q) = %d groups, want none", pair.Key, filter, len(groups))
			case w.GetCode() != "NO_RESULTS_ON_PAGE" || w.GetMessage() != "There are no results for scope '"+pair.Key+"' on this page." ||
				len(w.GetData()) != 1 || w.GetData()[0].GetKey() != "scope" || w.GetData()[0].GetValue() != pair.Key:
				t.Errorf("%s warning = %v, want NO_RESULTS_ON_PAGE for the scope", pair.Key, w)
			}
		}
		for _, s := range []string{"regions/us-central1", "zones/us-central1-f", "regions/asia-southeast1", "zones/europe-west4-c"} {
			if !scopes[s] {
				t.Errorf("filter %q: no scope %s in %d scopes", filter, s, len(scopes))
			}
		}
	}
}

// A selection naming a member the answer does not have is refused as
// Compute Engine refuses it; one the answer has is served.
func TestComputeFieldSelection(t *testing.T) {
	e := newEnv(t)
	_, cc := computeClient(t, e.srv)
	e.createCluster(t)
	for _, tc := range []struct{ fields, bad string }{
		{"items/*/instanceGroupManagers(name,zone,targetSize,currentActions/none),nextPageToken", ""},
		{"kind,items/*/warning(code,data/key)", ""},
		{"items/*/MachineType(zone),nextPageToken", "MachineType"},
		{"items/*/instanceGroupManagers(name,currentActions/nothing)", "nothing"},
		{"nextPageTokens", "nextPageTokens"},
	} {
		ctx := callctx.SetHeaders(e.ctx, "X-Goog-FieldMask", tc.fields)
		_, err := groups(ctx, cc, project)
		if tc.bad == "" {
			if err != nil {
				t.Errorf("AggregatedList with fields %s: %v", tc.fields, err)
			}
			continue
		}
		var ae *apierror.APIError
		if !errors.As(err, &ae) || ae.HTTPCode() != http.StatusBadRequest || !strings.Contains(err.Error(), "Invalid field selection "+tc.bad) {
			t.Errorf("AggregatedList with fields %s = %v, want 400 Invalid field selection %s", tc.fields, err, tc.bad)
		}
	}
}

// The Compute calls take the faults of faults.Injector, by the names of
// the InstanceGroupManagers RPCs, answered as Google's JSON APIs answer a
// gRPC code.
func TestComputeInjectedFaults(t *testing.T) {
	e := newEnv(t)
	cs, cc := computeClient(t, e.srv)
	e.createCluster(t)
	for _, m := range []string{ComputeAggregatedList, ComputeGet, "ListManagedInstances", faults.AnyMethod} {
		id, err := cs.Inject(faults.Fault{Method: m, Action: faults.Fail, Code: codes.Unavailable})
		if err != nil {
			t.Errorf("Inject(%s): %v", m, err)
		}
		cs.Remove(id)
	}
	if _, err := cs.Inject(faults.Fault{Method: "instanceGroupManagers.get", Action: faults.Fail, Code: codes.Unavailable}); !errors.Is(err, faults.ErrUnknownMethod) {
		t.Errorf("Inject of a REST name = %v, want ErrUnknownMethod", err)
	}
	tests := []struct {
		action   faults.Action
		code     codes.Code
		wantHTTP int
	}{
		{faults.Fail, codes.Unavailable, http.StatusServiceUnavailable},
		{faults.Lose, codes.DeadlineExceeded, http.StatusGatewayTimeout},
		{faults.Fail, codes.PermissionDenied, http.StatusForbidden},
	}
	for _, tt := range tests {
		before := cs.Calls(ComputeAggregatedList)
		if _, err := cs.Inject(faults.Fault{Method: ComputeAggregatedList, Action: tt.action, Code: tt.code, Count: 1}); err != nil {
			t.Fatal(err)
		}
		_, err := groups(e.ctx, cc, project)
		ae, ok := errors.AsType[*apierror.APIError](err)
		if !ok || ae.HTTPCode() != tt.wantHTTP {
			t.Errorf("%s %v: AggregatedList = %v, want HTTP %d", tt.action, tt.code, err, tt.wantHTTP)
		}
		if _, err := groups(e.ctx, cc, project); err != nil {
			t.Errorf("%s %v: the next AggregatedList = %v, want it served", tt.action, tt.code, err)
		}
		if n := cs.Calls(ComputeAggregatedList) - before; n != 2 {
			t.Errorf("%s %v: %d calls, want 2", tt.action, tt.code, n)
		}
	}
	if cs.Lost(ComputeAggregatedList) != 1 {
		t.Errorf("Lost = %d, want 1", cs.Lost(ComputeAggregatedList))
	}
}
