package kubeapply

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Node is what the product reads of a Kubernetes Node.
type Node struct {
	Name       string
	NodePool   string // the LabelNodePool label: the GKE node pool; empty when absent
	Zone       string // the LabelZone label; empty when absent
	ProviderID string // spec.providerID, such as gce://project/zone/instance
}

// nodesPageSize bounds one page of Nodes: big enough that a substrate of
// thousands of nodes takes a few calls, small enough that no answer is huge.
const nodesPageSize = 500

// Node reads the Node called name. An absent Node is an error wrapping
// ErrNodeNotFound.
func (c *Cluster) Node(ctx context.Context, name string) (Node, error) {
	if name == "" {
		return Node{}, errors.New("get node: empty name")
	}
	n, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Node{}, fmt.Errorf("get node %q: %w", name, ErrNodeNotFound)
	}
	if err != nil {
		return Node{}, fmt.Errorf("get node %q: %w", name, err)
	}
	return nodeOf(n), nil
}

// Nodes lists the Nodes of the given GKE node pools (by LabelNodePool), in
// the API server's order (by name), reading them in pages. No node pools:
// no Nodes, without a call.
func (c *Cluster) Nodes(ctx context.Context, nodePools []string) ([]Node, error) {
	if len(nodePools) == 0 {
		return nil, nil
	}
	req, err := labels.NewRequirement(LabelNodePool, selection.In, nodePools)
	if err != nil {
		return nil, fmt.Errorf("list nodes of node pools %q: %w", nodePools, err)
	}
	opts := metav1.ListOptions{
		LabelSelector: labels.NewSelector().Add(*req).String(),
		Limit:         c.pageSize,
	}
	var nodes []Node
	for {
		list, err := c.client.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			// An expired continue token (410) is returned too: a page
			// takes far less than the minutes a token lives, and the
			// caller's next run lists again.
			return nil, fmt.Errorf("list nodes of node pools %q: %w", nodePools, err)
		}
		for i := range list.Items {
			nodes = append(nodes, nodeOf(&list.Items[i]))
		}
		if list.Continue == "" {
			return nodes, nil
		}
		opts.Continue = list.Continue
	}
}

func nodeOf(n *corev1.Node) Node {
	return Node{
		Name:       n.Name,
		NodePool:   n.Labels[LabelNodePool],
		Zone:       n.Labels[LabelZone],
		ProviderID: n.Spec.ProviderID,
	}
}
