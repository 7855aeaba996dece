package gke

import (
	"testing"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// GetServerConfig answers the versions GKE serves: REGULAR's as the
// default, each channel's, and the valid master and node versions.
func TestServerConfig(t *testing.T) {
	e := newEnv(t)
	sc, err := e.client.GetServerConfig(e.ctx, &containerpb.GetServerConfigRequest{Name: parent})
	if err != nil {
		t.Fatal(err)
	}
	if sc.DefaultClusterVersion != DefaultVersions[containerpb.ReleaseChannel_REGULAR] {
		t.Errorf("defaultClusterVersion = %q, want REGULAR's %q", sc.DefaultClusterVersion, DefaultVersions[containerpb.ReleaseChannel_REGULAR])
	}
	if len(sc.ValidMasterVersions) != 4 || sc.ValidMasterVersions[0] != DefaultVersions[containerpb.ReleaseChannel_RAPID] || len(sc.ValidNodeVersions) != 4 {
		t.Errorf("valid versions = %v, %v; want the four channels' versions, newest first", sc.ValidMasterVersions, sc.ValidNodeVersions)
	}
	if len(sc.Channels) != 4 {
		t.Fatalf("channels = %v, want 4", sc.Channels)
	}
	for _, ch := range sc.Channels {
		if ch.DefaultVersion != DefaultVersions[ch.Channel] || len(ch.ValidVersions) == 0 || ch.ValidVersions[0] != ch.DefaultVersion {
			t.Errorf("channel %v = default %q valid %v, want default %q first", ch.Channel, ch.DefaultVersion, ch.ValidVersions, DefaultVersions[ch.Channel])
		}
	}
	if _, err := e.client.GetServerConfig(e.ctx, &containerpb.GetServerConfigRequest{Name: "projects/proj/locations/mars-north1"}); code(err) != codes.InvalidArgument {
		t.Errorf("GetServerConfig of an unknown location = %v, want InvalidArgument", err)
	}
}

// A minor alias resolves to the newest version of that minor; a version
// GKE no longer supports is refused in its words.
func TestVersionAliasAndUnsupported(t *testing.T) {
	e := newEnv(t)
	op, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{Name: "c1", InitialNodeCount: 1, InitialClusterVersion: "1.32"}})
	if err != nil {
		t.Fatalf("CreateCluster at 1.32: %v", err)
	}
	e.wait(t, op)
	c, _ := e.srv.Cluster(clusterN)
	if want := DefaultVersions[containerpb.ReleaseChannel_STABLE]; c.CurrentMasterVersion != want {
		t.Errorf("master version of 1.32 = %q, want %q", c.CurrentMasterVersion, want)
	}
	_, err = e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{Name: "c2", InitialNodeCount: 1, InitialClusterVersion: "1.29.1-gke.100"}})
	if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != `Master version "1.29.1-gke.100" is unsupported.` {
		t.Errorf("CreateCluster at 1.29.1-gke.100 = %v, want InvalidArgument Master version \"1.29.1-gke.100\" is unsupported.", err)
	}
	_, err = e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: &containerpb.NodePool{Name: "p1", InitialNodeCount: 1, Version: "1.29"}})
	if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != `Node version "1.29" is unsupported.` {
		t.Errorf("CreateNodePool at 1.29 = %v, want InvalidArgument Node version \"1.29\" is unsupported.", err)
	}
	op, err = e.client.CreateNodePool(e.ctx, &containerpb.CreateNodePoolRequest{Parent: clusterN, NodePool: &containerpb.NodePool{Name: "p1", InitialNodeCount: 1, Version: "1.32"}})
	if err != nil {
		t.Fatalf("CreateNodePool at 1.32: %v", err)
	}
	e.wait(t, op)
	if np, _ := e.srv.NodePool(clusterN + "/nodePools/p1"); np.GetVersion() != c.CurrentMasterVersion {
		t.Errorf("node version of 1.32 = %q, want %q", np.GetVersion(), c.CurrentMasterVersion)
	}
}

// A cluster that asks for a version and no channel is enrolled in the most
// stable channel offering that version; one that asks for neither, or
// for a channel, is where it asked (REGULAR by default).
func TestChannelOfAVersionWithoutChannel(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, version string
		channel       *containerpb.ReleaseChannel
		want          containerpb.ReleaseChannel_Channel
	}{
		{"none", "", nil, containerpb.ReleaseChannel_REGULAR},
		{"stable", "1.32", nil, containerpb.ReleaseChannel_STABLE},
		{"regular", "1.33", nil, containerpb.ReleaseChannel_REGULAR},
		{"rapid", "1.34", nil, containerpb.ReleaseChannel_RAPID},
		{"asked", "1.32", &containerpb.ReleaseChannel{Channel: containerpb.ReleaseChannel_RAPID}, containerpb.ReleaseChannel_RAPID},
	} {
		op, err := e.client.CreateCluster(e.ctx, &containerpb.CreateClusterRequest{Parent: parent, Cluster: &containerpb.Cluster{
			Name: tc.name, InitialNodeCount: 1, InitialClusterVersion: tc.version, ReleaseChannel: tc.channel}})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		e.wait(t, op)
		c, err := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: parent + "/clusters/" + tc.name})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.GetReleaseChannel().GetChannel(); got != tc.want {
			t.Errorf("%s: version %q, channel %v: enrolled in %v, want %v", tc.name, tc.version, tc.channel, got, tc.want)
		}
	}
}
