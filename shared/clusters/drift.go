package clusters

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"cloud.google.com/go/container/apiv1/containerpb"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// What a run compares of each pool with the provider's report of it
// (API.md §4, "Drift: the provider is looked at, never remembered"):
//   - its existence (GetCluster's node pools);
//   - its autoscaling (GetCluster);
//   - for a fixed pool, its size per zone as asked of the provider: the
//     target size of its instance groups (Compute Engine's
//     instanceGroupManagers, the listing the node counts are read from),
//     not the nodes it got, so that a stockout stays a stockout; and not
//     GKE's initialNodeCount, which a resize does not change;
//   - the fields no call changes in place (shape): machine type, disks,
//     spot, accelerators, zones, labels and taints.
// The first three are brought back with a call; a difference in the last
// is the pool's error, naming the field.

// observedShape is what GetCluster reports of a pool's fields that no
// call changes in place, in the spec's form.
func observedShape(np *containerpb.NodePool) *model.NodePoolSpec {
	cfg := np.GetConfig()
	s := &model.NodePoolSpec{
		Name:        np.GetName(),
		MachineType: cfg.GetMachineType(),
		DiskGiB:     int(cfg.GetDiskSizeGb()),
		DiskType:    cfg.GetDiskType(),
		Spot:        cfg.GetSpot(),
		Zones:       slices.Clone(np.GetLocations()),
		Labels:      maps.Clone(cfg.GetLabels()),
	}
	if a := cfg.GetAccelerators(); len(a) > 0 {
		s.Accelerators = &resource.Accelerators{Type: a[0].GetAcceleratorType(), Count: int(a[0].GetAcceleratorCount())}
	}
	for _, t := range cfg.GetTaints() {
		s.Taints = append(s.Taints, resource.Taint{Key: t.GetKey(), Value: t.GetValue(), Effect: effectName(t.GetEffect())})
	}
	return s
}

func effectName(e containerpb.NodeTaint_Effect) string {
	switch e {
	case containerpb.NodeTaint_NO_SCHEDULE:
		return "NoSchedule"
	case containerpb.NodeTaint_PREFER_NO_SCHEDULE:
		return "PreferNoSchedule"
	case containerpb.NodeTaint_NO_EXECUTE:
		return "NoExecute"
	}
	return e.String()
}

// providerManaged reports whether a label or taint key is one GKE or
// Kubernetes set themselves (a queued provisioning pool's
// cloud.google.com/gke-queued taint, a GPU pool's nvidia.com/gpu): a spec
// never holds one (API.md §5), so it is not a difference.
func providerManaged(key string) bool {
	if key == "nvidia.com/gpu" {
		return true
	}
	for _, p := range []string{"cloud.google.com/", "kubernetes.io/", "k8s.io/"} {
		if strings.HasPrefix(key, p) || strings.Contains(key, "."+p) {
			return true
		}
	}
	return false
}

// shapeDrift names the first field of the provider's pool (got; nil:
// not compared) that differs from the spec and that no call changes in
// place, with both values ("machineType n2-standard-8, spec
// e2-standard-4"); "" when none does. What the spec leaves to the
// provider's defaults (a disk's size or type; zones, which are the
// cluster's when the cluster names them) is not compared.
func shapeDrift(spec *model.NodePoolSpec, got *model.NodePoolSpec, clusterZones []string) string {
	if got == nil {
		return ""
	}
	differ := func(field, g, w string) string { return fmt.Sprintf("%s %s, spec %s", field, g, w) }
	switch {
	case spec.MachineType != "" && got.MachineType != "" && got.MachineType != spec.MachineType:
		return differ("machineType", got.MachineType, spec.MachineType)
	case spec.DiskGiB != 0 && got.DiskGiB != spec.DiskGiB:
		return differ("diskGiB", fmt.Sprint(got.DiskGiB), fmt.Sprint(spec.DiskGiB))
	case spec.DiskType != "" && got.DiskType != spec.DiskType:
		return differ("diskType", got.DiskType, spec.DiskType)
	case got.Spot != spec.Spot:
		return differ("spot", fmt.Sprint(got.Spot), fmt.Sprint(spec.Spot))
	case !sameAccelerators(spec.Accelerators, got.Accelerators) && !(spec.Accelerators == nil && gpusBuiltIn(spec.MachineType)):
		return differ("accelerators", accelerators(got.Accelerators), accelerators(spec.Accelerators))
	}
	zones := spec.Zones
	if len(zones) == 0 {
		zones = clusterZones
	}
	if len(zones) > 0 && len(got.Zones) > 0 && !sameSet(zones, got.Zones) {
		return differ("zones", list(got.Zones), list(zones))
	}
	gotLabels := maps.Clone(got.Labels)
	maps.DeleteFunc(gotLabels, func(k, _ string) bool { return providerManaged(k) })
	if !maps.Equal(gotLabels, spec.Labels) && (len(gotLabels) > 0 || len(spec.Labels) > 0) {
		return differ("labels", labels(gotLabels), labels(spec.Labels))
	}
	gotTaints := slices.DeleteFunc(slices.Clone(got.Taints), func(t resource.Taint) bool { return providerManaged(t.Key) })
	if !sameSet(taints(gotTaints), taints(spec.Taints)) {
		return differ("taints", list(taints(gotTaints)), list(taints(spec.Taints)))
	}
	return ""
}

// gpusBuiltIn reports whether a machine type comes with its GPUs (the
// accelerator-optimized families: A2, A3, A4, G2, G4), which the provider
// may report as the pool's accelerators though the spec names none.
func gpusBuiltIn(machineType string) bool {
	for _, f := range []string{"a2-", "a3-", "a4-", "g2-", "g4-"} {
		if strings.HasPrefix(machineType, f) {
			return true
		}
	}
	return false
}

func sameAccelerators(want, got *resource.Accelerators) bool {
	if want == nil || want.Count == 0 {
		return got == nil || got.Count == 0
	}
	return got != nil && *want == *got
}

func accelerators(a *resource.Accelerators) string {
	if a == nil || a.Count == 0 {
		return "none"
	}
	return fmt.Sprintf("%d %s", a.Count, a.Type)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// list is a set of values as a message says it: sorted, or "none".
func list(v []string) string {
	if len(v) == 0 {
		return "none"
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return strings.Join(v, ",")
}

func labels(m map[string]string) string {
	var kv []string
	for k, v := range m {
		kv = append(kv, k+"="+v)
	}
	return list(kv)
}

func taints(ts []resource.Taint) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Key+"="+t.Value+":"+t.Effect)
	}
	return out
}

// sizeDrift says how the provider's size per zone of a fixed pool
// (sizes, its instance groups' target sizes by zone) differs from want:
// "3 nodes per zone, spec 1", or zone by zone when the zones differ
// among themselves ("us-central1-a 3 nodes, us-central1-b 1 node, spec 2
// per zone"); "" when every zone has want.
func sizeDrift(sizes map[string]int, want int) string {
	same, first := true, -1
	for _, n := range sizes {
		if first < 0 {
			first = n
		}
		same = same && n == first
	}
	if same && first == want {
		return ""
	}
	if same {
		return fmt.Sprintf("%s per zone, spec %d", nodes(first), want)
	}
	var parts []string
	for _, z := range slices.Sorted(maps.Keys(sizes)) {
		parts = append(parts, z+" "+nodes(sizes[z]))
	}
	return fmt.Sprintf("%s, spec %d per zone", strings.Join(parts, ", "), want)
}

func nodes(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

// autoscalingWords says a pool's autoscaling in a message: "1-4 nodes
// per zone", or "off".
func autoscalingWords(a *resource.Autoscaling) string {
	if a == nil {
		return "off"
	}
	return fmt.Sprintf("%d-%d nodes per zone", a.MinNodes, a.MaxNodes)
}
