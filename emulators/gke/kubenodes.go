package gke

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
)

// Node labels GKE sets, which the product reads (the node pool) or may.
const (
	labelNodePool     = "cloud.google.com/gke-nodepool"
	labelZone         = "topology.kubernetes.io/zone"
	labelRegion       = "topology.kubernetes.io/region"
	labelInstanceType = "node.kubernetes.io/instance-type"
	labelHostname     = "kubernetes.io/hostname"
)

// fieldManager is the simulator's field manager in the clusters'
// Kubernetes APIs: it owns what GKE and the kubelet write on Nodes.
const fieldManager = "gke-simulator"

// kubeNode is a Node the simulator registers for a node of a node pool.
type kubeNode struct {
	name, pool, zone, machineType, version string
	providerID                             string
	labels                                 map[string]string
	taints                                 []corev1.Taint
	cpu, memoryMiB                         int64
}

// hash identifies what the simulator applies for the node, so that an
// unchanged node is not applied again every sync.
func (n kubeNode) hash() string {
	return fmt.Sprintf("%s|%s|%s|%s|%s|%v|%v|%d|%d", n.name, n.pool, n.zone, n.machineType, n.version, n.labels, n.taints, n.cpu, n.memoryMiB)
}

// kubeNodes returns the Nodes k's cluster should have: one per node of
// each node pool, as the simulator counts them per zone; false once the
// cluster has gone.
func (s *GServer) kubeNodes(k *kubeCluster) ([]kubeNode, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	c := k.c
	if c == nil || c.gone {
		return nil, false
	}
	var out []kubeNode
	for _, name := range c.order {
		np := c.pools[name]
		cfg := np.pb.Config
		// The pool's own labels first: GKE's win (it refuses a pool
		// that names one of them, and a Node's labels are GKE's to say).
		labels := maps.Clone(cfg.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, map[string]string{
			labelNodePool:                          np.pb.Name,
			labelRegion:                            c.region,
			labelInstanceType:                      cfg.MachineType,
			"cloud.google.com/machine-family":      machineTypes[cfg.MachineType].family,
			"cloud.google.com/gke-os-distribution": "cos",
			"kubernetes.io/os":                     "linux",
			"kubernetes.io/arch":                   "amd64",
		})
		if cfg.Spot {
			labels["cloud.google.com/gke-spot"] = "true"
		}
		if cfg.Preemptible {
			labels["cloud.google.com/gke-preemptible"] = "true"
		}
		if acc := accelerator(cfg); acc != "" {
			labels["cloud.google.com/gke-accelerator"] = acc
		}
		var taints []corev1.Taint
		for _, t := range cfg.Taints {
			taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: taintEffect(t.Effect)})
		}
		cpu, mem := shape(cfg.MachineType)
		for _, zone := range slices.Sorted(maps.Keys(np.nodes)) {
			for _, n := range nodeNames(c.key.cluster, np.pb.Name, c.pb.Id, np.uid, zone, int(np.nodes[zone])) {
				l := maps.Clone(labels)
				l[labelZone] = zone
				l[labelHostname] = n
				out = append(out, kubeNode{
					name: n, pool: np.pb.Name, zone: zone, machineType: cfg.MachineType, version: np.pb.Version,
					providerID: fmt.Sprintf("gce://%s/%s/%s", c.key.project, zone, n),
					labels:     l, taints: slices.Clone(taints), cpu: cpu, memoryMiB: mem,
				})
			}
		}
	}
	return out, true
}

// accelerator is the GPU type of a node configuration: the one it
// attaches, or the one built into its machine type.
func accelerator(cfg *containerpb.NodeConfig) string {
	for _, a := range cfg.Accelerators {
		return a.AcceleratorType
	}
	return machineTypes[cfg.MachineType].accelerator
}

func taintEffect(e containerpb.NodeTaint_Effect) corev1.TaintEffect {
	switch e {
	case containerpb.NodeTaint_PREFER_NO_SCHEDULE:
		return corev1.TaintEffectPreferNoSchedule
	case containerpb.NodeTaint_NO_EXECUTE:
		return corev1.TaintEffectNoExecute
	}
	return corev1.TaintEffectNoSchedule
}

// shape returns a machine type's vCPUs and memory in MiB, by the rules of
// Compute Engine's names (near enough for a Node's capacity).
func shape(machine string) (cpu, memoryMiB int64) {
	switch machine {
	case "e2-micro":
		return 2, 1024
	case "e2-small":
		return 2, 2048
	case "e2-medium":
		return 2, 4096
	}
	parts := strings.Split(machine, "-")
	if len(parts) != 3 {
		return 2, 4096
	}
	n, err := strconv.ParseInt(strings.TrimSuffix(parts[2], "g"), 10, 64)
	if err != nil || n <= 0 {
		return 2, 4096
	}
	if parts[0] == "a2" {
		// a2-highgpu-Ng: 12 vCPUs and 85 GB per GPU.
		return 12 * n, 85 * 1024 * n
	}
	perCPU := map[string]int64{"standard": 4096, "highmem": 8192, "highcpu": 1024}[parts[1]]
	if parts[0] == "n1" && parts[1] == "standard" {
		perCPU = 3840
	}
	if perCPU == 0 {
		perCPU = 4096
	}
	return n, n * perCPU
}

// nodeNames returns the names of a zone's n nodes, as GKE names them:
// gke-<cluster>-<pool>-<8 hex naming the zone's instance group>-<4
// characters naming the instance>, the first part cut so that the whole
// is a valid host name (63 characters). They are derived from the pool's
// identity, so the i-th node keeps its name while the pool lives: a
// shrink removes the last ones.
func nodeNames(clusterName, pool, clusterID, poolUID, zone string, n int) []string {
	prefix := "gke-" + clusterName + "-" + pool
	if len(prefix) > 49 {
		prefix = strings.TrimRight(prefix[:49], "-")
	}
	group := sha256.Sum256([]byte(clusterID + "/" + poolUID + "/" + zone))
	groupHex := hex.EncodeToString(group[:])[:8]
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	seen := map[string]bool{}
	names := make([]string, 0, n)
	for attempt := 0; len(names) < n; attempt++ {
		h := sha256.Sum256([]byte(groupHex + "/" + strconv.Itoa(attempt)))
		suffix := make([]byte, 4)
		for i := range suffix {
			suffix[i] = alphabet[int(h[i])%len(alphabet)]
		}
		// Collisions are rare but possible among a thousand nodes: skip.
		if s := string(suffix); !seen[s] {
			seen[s] = true
			names = append(names, prefix+"-"+groupHex+"-"+s)
		}
	}
	return names
}

// syncNodes makes the cluster's Nodes those of want: it applies the
// missing or changed ones (metadata and spec, then status, since the
// status is a subresource) and deletes the others.
func (k *kubeCluster) syncNodes(ctx context.Context, cs kubernetes.Interface, st *syncState, want []kubeNode) error {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	have := map[string]bool{}
	for _, n := range list.Items {
		have[n.Name] = true
	}
	wanted := map[string]bool{}
	for _, n := range want {
		wanted[n.name] = true
		h := n.hash()
		if have[n.name] && st.applied[n.name] == h {
			continue
		}
		if err := k.applyNode(ctx, cs, n); err != nil {
			return err
		}
		st.applied[n.name] = h
		if !have[n.name] {
			k.log.Info("Registered node", "node", n.name, "nodePool", n.pool, "zone", n.zone)
		}
	}
	for _, n := range list.Items {
		if wanted[n.Name] {
			continue
		}
		err := cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("delete node %s: %w", n.Name, err)
		}
		delete(st.applied, n.Name)
		k.log.Info("Removed node", "node", n.Name, "nodePool", n.Labels[labelNodePool])
	}
	return nil
}

func (k *kubeCluster) applyNode(ctx context.Context, cs kubernetes.Interface, n kubeNode) error {
	spec := corev1ac.NodeSpec().WithProviderID(n.providerID)
	for _, t := range n.taints {
		spec.WithTaints(corev1ac.Taint().WithKey(t.Key).WithValue(t.Value).WithEffect(t.Effect))
	}
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	node := corev1ac.Node(n.name).WithLabels(n.labels).WithSpec(spec)
	got, err := cs.CoreV1().Nodes().Apply(ctx, node, opts)
	if err != nil {
		return fmt.Errorf("apply node %s: %w", n.name, err)
	}
	if slices.ContainsFunc(got.Spec.Taints, isNotReadyTaint) {
		// The API server's admission taints a new Node
		// node.kubernetes.io/not-ready, owned by no field manager, which
		// the node lifecycle controller removes once the kubelet reports
		// Ready: do it.
		got.Spec.Taints = slices.DeleteFunc(got.Spec.Taints, isNotReadyTaint)
		if _, err := cs.CoreV1().Nodes().Update(ctx, got, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
			return fmt.Errorf("remove node %s's not-ready taint: %w", n.name, err)
		}
	}
	now := metav1.NewTime(k.g.now().UTC().Truncate(time.Second))
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(n.cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(n.memoryMiB<<20, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	status := corev1ac.NodeStatus().
		WithCapacity(capacity).
		WithAllocatable(capacity).
		WithConditions(corev1ac.NodeCondition().
			WithType(corev1.NodeReady).WithStatus(corev1.ConditionTrue).
			WithReason("KubeletReady").WithMessage("kubelet is posting ready status").
			WithLastHeartbeatTime(now).WithLastTransitionTime(now)).
		WithAddresses(corev1ac.NodeAddress().WithType(corev1.NodeHostName).WithAddress(n.name)).
		WithNodeInfo(corev1ac.NodeSystemInfo().
			WithKubeletVersion("v" + n.version).
			WithOperatingSystem("linux").WithArchitecture("amd64").
			WithOSImage("Container-Optimized OS from Google").
			WithContainerRuntimeVersion("containerd://1.7.24"))
	if _, err := cs.CoreV1().Nodes().ApplyStatus(ctx, corev1ac.Node(n.name).WithStatus(status), opts); err != nil {
		return fmt.Errorf("apply node %s status: %w", n.name, err)
	}
	return nil
}

func isNotReadyTaint(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }
