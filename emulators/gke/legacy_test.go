package gke

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const missingClusterN = "projects/proj/locations/us-central1/clusters/nope"

// busyCluster starts a cluster-level operation on c1 and returns the
// refusal GKE gives another cluster call meanwhile.
func (e *env) busyCluster(t *testing.T) (op *containerpb.Operation, refusal string) {
	t.Helper()
	op, err := e.client.UpdateCluster(e.ctx, &containerpb.UpdateClusterRequest{Name: clusterN, Update: &containerpb.ClusterUpdate{DesiredImageType: "COS_CONTAINERD"}})
	if err != nil {
		t.Fatalf("UpdateCluster: %v", err)
	}
	return op, fmt.Sprintf("Operation %s is currently operating on cluster c1. Please wait and try again once it is done.", op.Name)
}

// wantStatus fails t unless err has code c and, when words is not empty,
// that message.
func wantStatus(t *testing.T, what string, err error, c codes.Code, words string) {
	t.Helper()
	if code(err) != c || words != "" && status.Convert(err).Message() != words {
		t.Errorf("%s = %v, want %v %q", what, err, c, words)
	}
}

// TestLegacyClusterSetters: each older form of UpdateCluster starts an
// UPDATE_CLUSTER operation on the cluster, is refused while another runs
// and for a missing cluster as the other updates are, and its change reads
// back once the operation is done.
func TestLegacyClusterSetters(t *testing.T) {
	tests := []struct {
		name  string
		call  func(e *env, name string) (*containerpb.Operation, error)
		check func(c *containerpb.Cluster) string // "" when the change reads back
	}{
		{"SetLoggingService",
			func(e *env, name string) (*containerpb.Operation, error) {
				return e.client.SetLoggingService(e.ctx, &containerpb.SetLoggingServiceRequest{Name: name, LoggingService: "none"})
			},
			func(c *containerpb.Cluster) string {
				return unless(c.LoggingService == "none", "loggingService %q", c.LoggingService)
			}},
		{"SetMonitoringService",
			func(e *env, name string) (*containerpb.Operation, error) {
				return e.client.SetMonitoringService(e.ctx, &containerpb.SetMonitoringServiceRequest{Name: name, MonitoringService: "monitoring.googleapis.com/kubernetes"})
			},
			func(c *containerpb.Cluster) string {
				return unless(c.MonitoringService == "monitoring.googleapis.com/kubernetes", "monitoringService %q", c.MonitoringService)
			}},
		{"SetAddonsConfig",
			func(e *env, name string) (*containerpb.Operation, error) {
				return e.client.SetAddonsConfig(e.ctx, &containerpb.SetAddonsConfigRequest{Name: name, AddonsConfig: &containerpb.AddonsConfig{
					HttpLoadBalancing:   &containerpb.HttpLoadBalancing{Disabled: true},
					NetworkPolicyConfig: &containerpb.NetworkPolicyConfig{Disabled: false},
				}})
			},
			func(c *containerpb.Cluster) string {
				a := c.AddonsConfig
				return unless(a.GetHttpLoadBalancing().GetDisabled() && a.GetNetworkPolicyConfig() != nil && !a.NetworkPolicyConfig.Disabled, "addonsConfig %v", a)
			}},
		{"SetLocations",
			func(e *env, name string) (*containerpb.Operation, error) {
				return e.client.SetLocations(e.ctx, &containerpb.SetLocationsRequest{Name: name, Locations: []string{zoneA, zoneB}})
			},
			func(c *containerpb.Cluster) string {
				return unless(slices.Equal(c.Locations, []string{zoneA, zoneB}) && slices.Equal(c.NodePools[0].Locations, []string{zoneA, zoneB}),
					"locations %v, pool's %v", c.Locations, c.NodePools[0].Locations)
			}},
		{"SetLegacyAbac",
			func(e *env, name string) (*containerpb.Operation, error) {
				return e.client.SetLegacyAbac(e.ctx, &containerpb.SetLegacyAbacRequest{Name: name, Enabled: true})
			},
			func(c *containerpb.Cluster) string {
				return unless(c.LegacyAbac.GetEnabled(), "legacyAbac %v", c.LegacyAbac)
			}},
		{"SetNetworkPolicy",
			func(e *env, name string) (*containerpb.Operation, error) {
				return e.client.SetNetworkPolicy(e.ctx, &containerpb.SetNetworkPolicyRequest{Name: name, NetworkPolicy: &containerpb.NetworkPolicy{Enabled: true, Provider: containerpb.NetworkPolicy_CALICO}})
			},
			func(c *containerpb.Cluster) string {
				return unless(c.NetworkPolicy.GetEnabled() && c.NetworkPolicy.Provider == containerpb.NetworkPolicy_CALICO, "networkPolicy %v", c.NetworkPolicy)
			}},
		{"SetMasterAuth",
			func(e *env, name string) (*containerpb.Operation, error) {
				return e.client.SetMasterAuth(e.ctx, &containerpb.SetMasterAuthRequest{Name: name, Action: containerpb.SetMasterAuthRequest_SET_USERNAME, Update: &containerpb.MasterAuth{}})
			},
			func(c *containerpb.Cluster) string {
				return unless(c.MasterAuth.GetUsername() == "" && c.MasterAuth.GetPassword() == "", "masterAuth %v", c.MasterAuth)
			}},
		{"StartIPRotation",
			func(e *env, name string) (*containerpb.Operation, error) {
				return e.client.StartIPRotation(e.ctx, &containerpb.StartIPRotationRequest{Name: name, RotateCredentials: true})
			},
			func(*containerpb.Cluster) string { return "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.createCluster(t)
			_, err := tt.call(e, missingClusterN)
			wantStatus(t, tt.name+" of a missing cluster", err, codes.NotFound, "Not found: projects/proj/locations/us-central1/clusters/nope.")

			busy, refusal := e.busyCluster(t)
			_, err = tt.call(e, clusterN)
			wantStatus(t, tt.name+" while an update runs", err, codes.FailedPrecondition, refusal)
			e.wait(t, busy)

			op, err := tt.call(e, clusterN)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if op.OperationType != containerpb.Operation_UPDATE_CLUSTER || op.Status != containerpb.Operation_RUNNING || !strings.HasSuffix(op.TargetLink, "/clusters/c1") {
				t.Errorf("%s = %v %v on %s, want a RUNNING UPDATE_CLUSTER on the cluster", tt.name, op.OperationType, op.Status, op.TargetLink)
			}
			if c, _ := e.srv.Cluster(clusterN); c.Status != containerpb.Cluster_RECONCILING {
				t.Errorf("cluster during %s = %v, want RECONCILING", tt.name, c.Status)
			}
			if done := e.wait(t, op); done.Error != nil {
				t.Fatalf("%s ended with %v", tt.name, done.Error)
			}
			c, err := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: clusterN})
			if err != nil {
				t.Fatal(err)
			}
			if c.Status != containerpb.Cluster_RUNNING {
				t.Errorf("cluster after %s = %v, want RUNNING", tt.name, c.Status)
			}
			if msg := tt.check(c); msg != "" {
				t.Errorf("after %s: %s", tt.name, msg)
			}
		})
	}
}

// unless is "" when ok, the formatted message otherwise.
func unless(ok bool, format string, args ...any) string {
	if ok {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

func TestSetLocations(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t, pool("p0", "e2-standard-4", 2, zoneA), pool("p1", "e2-standard-4", 1, zoneA, zoneB))
	// The deprecated fields name the cluster as well.
	op, err := e.client.SetLocations(e.ctx, &containerpb.SetLocationsRequest{ProjectId: project, Zone: region, ClusterId: "c1", Locations: []string{zoneB, zoneF}})
	if err != nil {
		t.Fatalf("SetLocations: %v", err)
	}
	e.wait(t, op)
	// Every pool takes the new zones: a zone it keeps keeps its nodes, a
	// new one gets as many as the pool's busiest zone.
	for pool, want := range map[string]map[string]int32{"p0": {zoneB: 2, zoneF: 2}, "p1": {zoneB: 1, zoneF: 1}} {
		n, err := e.srv.NodeCounts(clusterN + "/nodePools/" + pool)
		if err != nil || len(n) != 2 || n[zoneB] != want[zoneB] || n[zoneF] != want[zoneF] {
			t.Errorf("NodeCounts(%s) = %v, %v; want %v", pool, n, err, want)
		}
	}
	// UpdateCluster's desired_locations is the same change.
	op, err = e.client.UpdateCluster(e.ctx, &containerpb.UpdateClusterRequest{Name: clusterN, Update: &containerpb.ClusterUpdate{DesiredLocations: []string{zoneA}}})
	if err != nil {
		t.Fatalf("UpdateCluster desired_locations: %v", err)
	}
	e.wait(t, op)
	if np := e.getPool(t, "p1"); !slices.Equal(np.Locations, []string{zoneA}) {
		t.Errorf("p1 locations = %v, want [%s]", np.Locations, zoneA)
	}
	for _, tt := range []struct {
		name string
		locs []string
	}{
		{"none", nil},
		{"another region's zone", []string{zoneA, "us-east1-b"}},
		{"a region", []string{region}},
		{"twice a zone", []string{zoneA, zoneA}},
	} {
		_, err := e.client.SetLocations(e.ctx, &containerpb.SetLocationsRequest{Name: clusterN, Locations: tt.locs})
		wantStatus(t, "SetLocations "+tt.name, err, codes.InvalidArgument, "")
	}

	// A zonal cluster's nodes must stay in its zone, among others.
	op, err = e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: "projects/proj/locations/" + zoneA, Cluster: &containerpb.Cluster{Name: "z1", InitialNodeCount: 1}})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Step(opTime)
	z1 := "projects/proj/locations/" + zoneA + "/clusters/z1"
	_, err = e.client.SetLocations(e.ctx, &containerpb.SetLocationsRequest{Name: z1, Locations: []string{zoneB}})
	wantStatus(t, "SetLocations of a zonal cluster without its zone", err, codes.InvalidArgument, "")
	if _, err = e.client.SetLocations(e.ctx, &containerpb.SetLocationsRequest{Name: z1, Locations: []string{zoneA, zoneB}}); err != nil {
		t.Errorf("SetLocations of a zonal cluster with its zone: %v", err)
	}
	_ = op
}

func TestSetMasterAuth(t *testing.T) {
	set := func(e *env, action containerpb.SetMasterAuthRequest_Action, u *containerpb.MasterAuth) (*containerpb.Operation, error) {
		return e.client.SetMasterAuth(e.ctx, &containerpb.SetMasterAuthRequest{Name: clusterN, Action: action, Update: u})
	}
	t.Run("1.19 and later", func(t *testing.T) {
		e := newEnv(t)
		e.createCluster(t)
		for _, tt := range []struct {
			action containerpb.SetMasterAuthRequest_Action
			u      *containerpb.MasterAuth
		}{
			{containerpb.SetMasterAuthRequest_SET_PASSWORD, &containerpb.MasterAuth{Password: "secret-secret-16"}},
			{containerpb.SetMasterAuthRequest_GENERATE_PASSWORD, nil},
			{containerpb.SetMasterAuthRequest_SET_USERNAME, &containerpb.MasterAuth{Username: "admin"}},
		} {
			_, err := set(e, tt.action, tt.u)
			wantStatus(t, "SetMasterAuth "+tt.action.String(), err, codes.InvalidArgument, basicAuthRemoved)
		}
		// Turning basic authentication off is always accepted.
		op, err := set(e, containerpb.SetMasterAuthRequest_SET_USERNAME, &containerpb.MasterAuth{})
		if err != nil {
			t.Fatalf("SetMasterAuth SET_USERNAME \"\": %v", err)
		}
		e.wait(t, op)
	})
	t.Run("1.18", func(t *testing.T) {
		const v = "1.18.20-gke.1100"
		e := newEnv(t, WithVersions(map[containerpb.ReleaseChannel_Channel]string{
			containerpb.ReleaseChannel_RAPID: v, containerpb.ReleaseChannel_REGULAR: v, containerpb.ReleaseChannel_STABLE: v, containerpb.ReleaseChannel_EXTENDED: v,
		}))
		e.createCluster(t)
		auth := func() *containerpb.MasterAuth {
			c, err := e.srv.Cluster(clusterN)
			if err != nil {
				t.Fatal(err)
			}
			return c.MasterAuth
		}
		step := func(action containerpb.SetMasterAuthRequest_Action, u *containerpb.MasterAuth) *containerpb.MasterAuth {
			t.Helper()
			op, err := set(e, action, u)
			if err != nil {
				t.Fatalf("SetMasterAuth %v: %v", action, err)
			}
			if op.OperationType != containerpb.Operation_UPDATE_CLUSTER {
				t.Errorf("SetMasterAuth %v operation = %v, want UPDATE_CLUSTER (the API's type for master auth)", action, op.OperationType)
			}
			e.wait(t, op)
			return auth()
		}
		// A username without a password gets a generated one.
		a := step(containerpb.SetMasterAuthRequest_SET_USERNAME, &containerpb.MasterAuth{Username: "admin"})
		if a.Username != "admin" || len(a.Password) != 16 {
			t.Errorf("after SET_USERNAME admin: %v, want admin with a generated password", a)
		}
		a = step(containerpb.SetMasterAuthRequest_SET_PASSWORD, &containerpb.MasterAuth{Password: "chosen-password1"})
		if a.Username != "admin" || a.Password != "chosen-password1" {
			t.Errorf("after SET_PASSWORD: %v, want admin/chosen-password1", a)
		}
		a = step(containerpb.SetMasterAuthRequest_GENERATE_PASSWORD, nil)
		if a.Username != "admin" || len(a.Password) != 16 || a.Password == "chosen-password1" {
			t.Errorf("after GENERATE_PASSWORD: %v, want admin with a new password", a)
		}
		a = step(containerpb.SetMasterAuthRequest_SET_USERNAME, &containerpb.MasterAuth{})
		if a.GetUsername() != "" || a.GetPassword() != "" {
			t.Errorf("after SET_USERNAME \"\": %v, want basic authentication off", a)
		}
		_, err := set(e, containerpb.SetMasterAuthRequest_SET_PASSWORD, &containerpb.MasterAuth{})
		wantStatus(t, "SET_PASSWORD without a password", err, codes.InvalidArgument, "")
		_, err = set(e, containerpb.SetMasterAuthRequest_UNKNOWN, nil)
		wantStatus(t, "SetMasterAuth UNKNOWN", err, codes.InvalidArgument, "")
	})
}

func TestIPRotation(t *testing.T) {
	e := newEnv(t)
	e.createCluster(t)
	complete := func() (*containerpb.Operation, error) {
		return e.client.CompleteIPRotation(e.ctx, &containerpb.CompleteIPRotationRequest{Name: clusterN})
	}
	start := func() (*containerpb.Operation, error) {
		return e.client.StartIPRotation(e.ctx, &containerpb.StartIPRotationRequest{Name: clusterN})
	}
	_, err := complete()
	wantStatus(t, "CompleteIPRotation before a start", err, codes.FailedPrecondition, `Cluster "c1" is not rotating its IP: start a rotation first.`)
	_, err = e.client.CompleteIPRotation(e.ctx, &containerpb.CompleteIPRotationRequest{Name: missingClusterN})
	wantStatus(t, "CompleteIPRotation of a missing cluster", err, codes.NotFound, "Not found: projects/proj/locations/us-central1/clusters/nope.")

	op, err := start()
	if err != nil {
		t.Fatalf("StartIPRotation: %v", err)
	}
	// The rotation has begun once the operation is done.
	_, err = complete()
	wantStatus(t, "CompleteIPRotation while the start runs", err, codes.FailedPrecondition,
		fmt.Sprintf("Operation %s is currently operating on cluster c1. Please wait and try again once it is done.", op.Name))
	e.wait(t, op)
	_, err = start()
	wantStatus(t, "StartIPRotation during a rotation", err, codes.FailedPrecondition, `Cluster "c1" is already rotating its IP: complete the rotation first.`)

	// A restored simulator is still rotating.
	snap, err := e.srv.Snapshot(nil)
	if err != nil {
		t.Fatal(err)
	}
	srv2, err := NewServer(WithClock(e.clock), WithOperationTime(opTime))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv2.Close() })
	if err := srv2.Restore(snap); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	e = &env{srv: srv2, client: newEnvClient(t, srv2), clock: e.clock, ctx: e.ctx}

	op, err = complete()
	if err != nil {
		t.Fatalf("CompleteIPRotation: %v", err)
	}
	if op.OperationType != containerpb.Operation_UPDATE_CLUSTER {
		t.Errorf("CompleteIPRotation operation = %v, want UPDATE_CLUSTER", op.OperationType)
	}
	e.wait(t, op)
	_, err = complete()
	wantStatus(t, "CompleteIPRotation after the rotation", err, codes.FailedPrecondition, "")
	if _, err := start(); err != nil {
		t.Errorf("StartIPRotation after a completed rotation: %v", err)
	}
}

func TestSetNodePoolManagement(t *testing.T) {
	set := func(e *env, name string, m *containerpb.NodeManagement) (*containerpb.Operation, error) {
		return e.client.SetNodePoolManagement(e.ctx, &containerpb.SetNodePoolManagementRequest{Name: name, Management: m})
	}
	p0 := clusterN + "/nodePools/p0"
	t.Run("release channel", func(t *testing.T) {
		e := newEnv(t)
		e.createCluster(t)
		for m, words := range map[*containerpb.NodeManagement]string{
			{AutoRepair: true}:  "Auto_upgrade cannot be false when release_channel REGULAR is set.",
			{AutoUpgrade: true}: "Auto_repair cannot be false when release_channel REGULAR is set.",
			{}:                  "Auto_upgrade and auto_repair cannot be false when release_channel REGULAR is set.",
		} {
			_, err := set(e, p0, m)
			wantStatus(t, fmt.Sprintf("SetNodePoolManagement %v", m), err, codes.InvalidArgument, words)
		}
		op, err := set(e, p0, &containerpb.NodeManagement{AutoRepair: true, AutoUpgrade: true})
		if err != nil {
			t.Fatalf("SetNodePoolManagement: %v", err)
		}
		if op.OperationType != containerpb.Operation_SET_NODE_POOL_MANAGEMENT || op.Status != containerpb.Operation_PENDING || !strings.HasSuffix(op.TargetLink, "/nodePools/p0") {
			t.Errorf("SetNodePoolManagement = %v %v on %s, want a PENDING SET_NODE_POOL_MANAGEMENT on the pool", op.OperationType, op.Status, op.TargetLink)
		}
		e.wait(t, op)
	})
	t.Run("no channel", func(t *testing.T) {
		e := newEnv(t)
		op, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{
			Name: "c1", NodePools: []*containerpb.NodePool{pool("p0", "e2-standard-4", 1, zoneA)}, ReleaseChannel: &containerpb.ReleaseChannel{},
		}})
		if err != nil {
			t.Fatal(err)
		}
		e.wait(t, op)
		_, err = set(e, clusterN+"/nodePools/nope", &containerpb.NodeManagement{})
		wantStatus(t, "SetNodePoolManagement of a missing pool", err, codes.NotFound, `Not found: node pool "nope" not found.`)
		_, err = set(e, "projects/proj/locations/us-central1/clusters/nope/nodePools/p0", &containerpb.NodeManagement{})
		wantStatus(t, "SetNodePoolManagement in a missing cluster", err, codes.NotFound, "Not found: projects/proj/locations/us-central1/clusters/nope.")

		resize, err := e.client.SetNodePoolSize(e.ctx, &containerpb.SetNodePoolSizeRequest{Name: p0, NodeCount: 2})
		if err != nil {
			t.Fatal(err)
		}
		_, err = set(e, p0, &containerpb.NodeManagement{})
		wantStatus(t, "SetNodePoolManagement during a resize", err, codes.FailedPrecondition, "Cluster is running incompatible operation "+resize.Name+".")
		e.wait(t, resize)

		op, err = set(e, p0, &containerpb.NodeManagement{AutoUpgrade: true})
		if err != nil {
			t.Fatalf("SetNodePoolManagement: %v", err)
		}
		if np := e.getPool(t, "p0"); np.Status != containerpb.NodePool_RECONCILING {
			t.Errorf("pool during SetNodePoolManagement = %v, want RECONCILING", np.Status)
		}
		e.wait(t, op)
		if m := e.getPool(t, "p0").Management; !m.GetAutoUpgrade() || m.GetAutoRepair() {
			t.Errorf("management = %v, want auto-upgrade only", m)
		}
	})
}

// TestLegacySettersSurviveRestore: an operation of the older forms that
// runs when the simulator is saved ends, once restored, with its change.
func TestLegacySettersSurviveRestore(t *testing.T) {
	for _, tt := range []struct {
		name  string
		start func(e *env) (*containerpb.Operation, error)
		check func(e *env) string
	}{
		{"SetLegacyAbac",
			func(e *env) (*containerpb.Operation, error) {
				return e.client.SetLegacyAbac(e.ctx, &containerpb.SetLegacyAbacRequest{Name: clusterN, Enabled: true})
			},
			func(e *env) string {
				c, _ := e.srv.Cluster(clusterN)
				return unless(c.GetLegacyAbac().GetEnabled(), "legacyAbac %v", c.GetLegacyAbac())
			}},
		{"SetNodePoolManagement",
			func(e *env) (*containerpb.Operation, error) {
				return e.client.SetNodePoolManagement(e.ctx, &containerpb.SetNodePoolManagementRequest{Name: clusterN + "/nodePools/p0", Management: &containerpb.NodeManagement{AutoRepair: true, AutoUpgrade: true}})
			},
			func(e *env) string {
				np, _ := e.srv.NodePool(clusterN + "/nodePools/p0")
				return unless(np.GetManagement().GetAutoRepair() && np.GetManagement().GetAutoUpgrade(), "management %v", np.GetManagement())
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.createCluster(t)
			op, err := tt.start(e)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := e.srv.Snapshot(nil)
			if err != nil {
				t.Fatal(err)
			}
			srv2, err := NewServer(WithClock(e.clock), WithOperationTime(opTime))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = srv2.Close() })
			if err := srv2.Restore(snap); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			e2 := &env{srv: srv2, client: newEnvClient(t, srv2), clock: e.clock, ctx: e.ctx}
			e2.wait(t, op)
			if msg := tt.check(e2); msg != "" {
				t.Errorf("after Restore and %s: %s", tt.name, msg)
			}
		})
	}
}
