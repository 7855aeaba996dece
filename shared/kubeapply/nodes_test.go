package kubeapply

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodes(t *testing.T) {
	c, _ := testCluster(t)
	ctx := t.Context()
	c.pageSize = 2 // so that listing takes several pages

	// Nodes labelled as GKE labels them.
	nodes := []Node{
		{Name: "gke-c-a-1", NodePool: "bc-pool-a", Zone: "us-central1-a", ProviderID: "gce://proj/us-central1-a/gke-c-a-1"},
		{Name: "gke-c-a-2", NodePool: "bc-pool-a", Zone: "us-central1-b", ProviderID: "gce://proj/us-central1-b/gke-c-a-2"},
		{Name: "gke-c-a-3", NodePool: "bc-pool-a", Zone: "us-central1-a", ProviderID: "gce://proj/us-central1-a/gke-c-a-3"},
		{Name: "gke-c-b-1", NodePool: "bc-pool-b", Zone: "us-central1-c", ProviderID: "gce://proj/us-central1-c/gke-c-b-1"},
		{Name: "gke-c-default-1", NodePool: "default-pool", Zone: "us-central1-a", ProviderID: "gce://proj/us-central1-a/gke-c-default-1"},
		{Name: "unlabelled"},
	}
	for _, n := range nodes {
		labels := map[string]string{
			"kubernetes.io/hostname": n.Name,
			"kubernetes.io/os":       "linux",
		}
		if n.NodePool != "" {
			labels[LabelNodePool] = n.NodePool
			labels[LabelZone] = n.Zone
			labels["topology.kubernetes.io/region"] = "us-central1"
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels},
			Spec:       corev1.NodeSpec{ProviderID: n.ProviderID},
		}
		if _, err := c.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node %s: %v", n.Name, err)
		}
	}

	t.Run("Node", func(t *testing.T) {
		for _, want := range nodes {
			got, err := c.Node(ctx, want.Name)
			if err != nil || got != want {
				t.Errorf("Node(%q) = %+v, %v; want %+v", want.Name, got, err, want)
			}
		}
		if got, err := c.Node(ctx, "gke-c-a-9"); !errors.Is(err, ErrNodeNotFound) {
			t.Errorf("Node(absent) = %+v, %v; want ErrNodeNotFound", got, err)
		}
	})

	tests := []struct {
		name  string
		pools []string
		want  []Node
	}{
		{"two pools over several pages", []string{"bc-pool-b", "bc-pool-a"}, nodes[:4]},
		{"one pool", []string{"bc-pool-b"}, nodes[3:4]},
		{"a pool without nodes", []string{"bc-pool-z"}, nil},
		{"no pools", nil, nil},
	}
	for _, tt := range tests {
		t.Run("Nodes/"+tt.name, func(t *testing.T) {
			got, err := c.Nodes(ctx, tt.pools)
			if err != nil {
				t.Fatalf("Nodes(%q) = %v", tt.pools, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Nodes(%q) (-want +got):\n%s", tt.pools, diff)
			}
		})
	}
	if _, err := c.Nodes(ctx, []string{"not a label value"}); err == nil {
		t.Errorf("Nodes(invalid pool name) = nil error, want one")
	}
}
