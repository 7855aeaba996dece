package gke

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// regions maps each region the emulator knows to its zones. A cluster's
// location must be one of these regions or zones.
var regions = map[string][]string{
	"us-central1":     {"us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"},
	"us-east1":        {"us-east1-b", "us-east1-c", "us-east1-d"},
	"us-west1":        {"us-west1-a", "us-west1-b", "us-west1-c"},
	"us-west2":        {"us-west2-a", "us-west2-b", "us-west2-c"},
	"europe-west1":    {"europe-west1-b", "europe-west1-c", "europe-west1-d"},
	"europe-west4":    {"europe-west4-a", "europe-west4-b", "europe-west4-c"},
	"asia-southeast1": {"asia-southeast1-a", "asia-southeast1-b", "asia-southeast1-c"},
	// A recording's private cluster was made in northamerica-northeast1-a.
	"northamerica-northeast1": {"northamerica-northeast1-a", "northamerica-northeast1-b", "northamerica-northeast1-c"},
	// And others in northamerica-northeast2-a, northamerica-south1-a and
	// -b, and a regional one in us-west4.
	"northamerica-northeast2": {"northamerica-northeast2-a", "northamerica-northeast2-b", "northamerica-northeast2-c"},
	"northamerica-south1":     {"northamerica-south1-a", "northamerica-south1-b", "northamerica-south1-c"},
	"us-west4":                {"us-west4-a", "us-west4-b", "us-west4-c"},
}

// regionOf returns the region of a zone or region, and whether loc is a zone.
func regionOf(loc string) (region string, zone bool, ok bool) {
	if _, ok := regions[loc]; ok {
		return loc, false, true
	}
	i := strings.LastIndex(loc, "-")
	if i < 0 {
		return "", false, false
	}
	if slices.Contains(regions[loc[:i]], loc) {
		return loc[:i], true, true
	}
	return "", false, false
}

// machineType is one shape of the catalog.
type machineType struct {
	family string
	// accelerator and accelerators are the GPUs built into the shape (a2,
	// g2), which GKE attaches whether or not the node pool lists them.
	accelerator  string
	accelerators int64
}

// family describes what a machine family allows.
type family struct {
	diskTypes []string
	// attachable lists the GPUs that can be attached to the family (n1)
	// and the counts each allows.
	attachable map[string][]int64
	// missingZones are zones that do not offer the family: a node pool
	// asking for one is accepted and then fails, as GKE only finds out
	// when it creates the instance group.
	missingZones []string
}

var families = map[string]family{
	"e2":  {diskTypes: []string{"pd-standard", "pd-balanced", "pd-ssd"}},
	"n2":  {diskTypes: []string{"pd-standard", "pd-balanced", "pd-ssd", "pd-extreme"}},
	"n2d": {diskTypes: []string{"pd-standard", "pd-balanced", "pd-ssd"}},
	"c3":  {diskTypes: []string{"pd-balanced", "pd-ssd", "hyperdisk-balanced", "hyperdisk-extreme"}},
	// n4 takes Hyperdisk only, which GKE gives its nodes by default.
	"n4": {diskTypes: []string{"hyperdisk-balanced"}},
	"n1": {
		diskTypes: []string{"pd-standard", "pd-balanced", "pd-ssd"},
		attachable: map[string][]int64{
			"nvidia-tesla-t4":   {1, 2, 4},
			"nvidia-tesla-p4":   {1, 2, 4},
			"nvidia-tesla-v100": {1, 2, 4, 8},
		},
	},
	"g2": {
		diskTypes:    []string{"pd-balanced", "pd-ssd", "hyperdisk-balanced"},
		missingZones: []string{"us-central1-f", "europe-west1-d"},
	},
	"a2": {
		diskTypes:    []string{"pd-standard", "pd-balanced", "pd-ssd"},
		missingZones: []string{"europe-west4-c", "us-east1-d", "us-west1-c"},
	},
}

// machineTypes is the catalog of shapes, built once.
var machineTypes = buildMachineTypes()

func buildMachineTypes() map[string]machineType {
	m := map[string]machineType{}
	add := func(fam string, kinds []string, sizes ...int) {
		for _, k := range kinds {
			for _, n := range sizes {
				m[fmt.Sprintf("%s-%s-%d", fam, k, n)] = machineType{family: fam}
			}
		}
	}
	for _, n := range []string{"e2-micro", "e2-small", "e2-medium"} {
		m[n] = machineType{family: "e2"}
	}
	add("e2", []string{"standard", "highcpu"}, 2, 4, 8, 16, 32)
	add("e2", []string{"highmem"}, 2, 4, 8, 16)
	add("n1", []string{"standard"}, 1, 2, 4, 8, 16, 32, 64, 96)
	add("n1", []string{"highmem", "highcpu"}, 2, 4, 8, 16, 32, 64, 96)
	add("n2", []string{"standard", "highmem", "highcpu"}, 2, 4, 8, 16, 32, 48, 64, 80, 96, 128)
	add("n2d", []string{"standard", "highmem", "highcpu"}, 2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224)
	add("c3", []string{"standard", "highmem", "highcpu"}, 4, 8, 22, 44, 88, 176)
	add("n4", []string{"standard", "highmem", "highcpu"}, 2, 4, 8, 16, 32, 48, 64, 80)
	for n, gpus := range map[int]int64{4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8} {
		m[fmt.Sprintf("g2-standard-%d", n)] = machineType{family: "g2", accelerator: "nvidia-l4", accelerators: gpus}
	}
	for _, n := range []int64{1, 2, 4, 8} {
		m[fmt.Sprintf("a2-highgpu-%dg", n)] = machineType{family: "a2", accelerator: "nvidia-tesla-a100", accelerators: n}
		m[fmt.Sprintf("a2-ultragpu-%dg", n)] = machineType{family: "a2", accelerator: "nvidia-a100-80gb", accelerators: n}
	}
	m["a2-megagpu-16g"] = machineType{family: "a2", accelerator: "nvidia-tesla-a100", accelerators: 16}
	return m
}

// gpuHome names the machine family each built-in accelerator needs, so a
// refusal can say where the accelerator would work.
func gpuHome(acc string) string {
	switch acc {
	case "nvidia-l4":
		return "g2"
	case "nvidia-tesla-a100", "nvidia-a100-80gb":
		return "a2"
	case "nvidia-tesla-t4", "nvidia-tesla-p4", "nvidia-tesla-v100":
		return "n1"
	}
	return ""
}

const (
	defaultMachineType = "e2-medium"
	defaultDiskType    = "pd-balanced"
	defaultDiskSizeGb  = 100
	maxNodesPerZone    = 1000
)

// checkNodeConfig validates and defaults a node pool's configuration in
// place. It returns INVALID_ARGUMENT for what GKE refuses synchronously.
func checkNodeConfig(pool string, cfg *containerpb.NodeConfig) error {
	if cfg.MachineType == "" {
		cfg.MachineType = defaultMachineType
	}
	mt, ok := machineTypes[cfg.MachineType]
	if !ok {
		return status.Errorf(codes.InvalidArgument, "Node pool %q: invalid machine type %q: no such machine type.", pool, cfg.MachineType)
	}
	fam := families[mt.family]
	if cfg.DiskType == "" {
		cfg.DiskType = defaultDiskType
		if !slices.Contains(fam.diskTypes, defaultDiskType) {
			cfg.DiskType = fam.diskTypes[0]
		}
	}
	if !slices.Contains(fam.diskTypes, cfg.DiskType) {
		return status.Errorf(codes.InvalidArgument, "Node pool %q: disk type %q is not supported by machine type %q; supported disk types: %s.", pool, cfg.DiskType, cfg.MachineType, strings.Join(fam.diskTypes, ", "))
	}
	if cfg.DiskSizeGb == 0 {
		cfg.DiskSizeGb = defaultDiskSizeGb
	}
	if cfg.DiskSizeGb < 10 || cfg.DiskSizeGb > 65536 {
		return status.Errorf(codes.InvalidArgument, "Node pool %q: disk size %d GB is out of range [10, 65536].", pool, cfg.DiskSizeGb)
	}
	if cfg.Spot && cfg.Preemptible {
		return status.Errorf(codes.InvalidArgument, "Node pool %q: spot and preemptible cannot both be set.", pool)
	}
	if len(cfg.Accelerators) > 1 {
		return status.Errorf(codes.InvalidArgument, "Node pool %q: at most one accelerator type per node pool.", pool)
	}
	for _, a := range cfg.Accelerators {
		if err := checkAccelerator(pool, cfg.MachineType, mt, fam, a); err != nil {
			return err
		}
	}
	if err := checkNodeLabels(cfg.Labels); err != nil {
		return err
	}
	for _, t := range cfg.Taints {
		if t.Key == "" {
			return status.Errorf(codes.InvalidArgument, "Node pool %q: taint key must not be empty.", pool)
		}
		if t.Effect == containerpb.NodeTaint_EFFECT_UNSPECIFIED {
			return status.Errorf(codes.InvalidArgument, "Node pool %q: taint %q has no effect; want NO_SCHEDULE, PREFER_NO_SCHEDULE or NO_EXECUTE.", pool, t.Key)
		}
	}
	return nil
}

func checkAccelerator(pool, name string, mt machineType, fam family, a *containerpb.AcceleratorConfig) error {
	if a.AcceleratorCount <= 0 {
		return status.Errorf(codes.InvalidArgument, "Node pool %q: accelerator %q count must be positive, got %d.", pool, a.AcceleratorType, a.AcceleratorCount)
	}
	if mt.accelerator != "" {
		if a.AcceleratorType != mt.accelerator {
			return status.Errorf(codes.InvalidArgument, "Node pool %q: accelerator type %q is not supported with machine type %q, which comes with %q.", pool, a.AcceleratorType, name, mt.accelerator)
		}
		if a.AcceleratorCount != mt.accelerators {
			return status.Errorf(codes.InvalidArgument, "Node pool %q: machine type %q requires exactly %d %q accelerator(s), got %d.", pool, name, mt.accelerators, mt.accelerator, a.AcceleratorCount)
		}
		return nil
	}
	counts, ok := fam.attachable[a.AcceleratorType]
	if !ok {
		if home := gpuHome(a.AcceleratorType); home != "" {
			return status.Errorf(codes.InvalidArgument, "Node pool %q: accelerator type %q is not supported with machine type %q; it requires a %s machine type.", pool, a.AcceleratorType, name, home)
		}
		return status.Errorf(codes.InvalidArgument, "Node pool %q: unknown accelerator type %q.", pool, a.AcceleratorType)
	}
	if !slices.Contains(counts, a.AcceleratorCount) {
		return status.Errorf(codes.InvalidArgument, "Node pool %q: accelerator %q count %d is not allowed with machine type %q; allowed counts: %v.", pool, a.AcceleratorType, a.AcceleratorCount, name, counts)
	}
	return nil
}

// checkLocations validates node locations against the cluster's region.
func checkLocations(pool, region string, locs []string) error {
	seen := map[string]bool{}
	for _, z := range locs {
		if seen[z] {
			return status.Errorf(codes.InvalidArgument, "Node pool %q: duplicate location %q.", pool, z)
		}
		seen[z] = true
		r, isZone, ok := regionOf(z)
		if !ok || !isZone {
			return status.Errorf(codes.InvalidArgument, "Node pool %q: location %q is not a valid zone.", pool, z)
		}
		if r != region {
			return status.Errorf(codes.InvalidArgument, "Node pool %q: location %q is not in the cluster's region %q.", pool, z, region)
		}
	}
	return nil
}

// missingZone returns the first of zones that does not offer the machine
// type's family, or "".
func missingZone(machine string, zones []string) string {
	fam := families[machineTypes[machine].family]
	for _, z := range zones {
		if slices.Contains(fam.missingZones, z) {
			return z
		}
	}
	return ""
}

// defaultZones returns the node locations of a cluster created at loc: the
// zone itself, or the region's first three zones, as GKE picks three.
func defaultZones(loc string) []string {
	region, isZone, _ := regionOf(loc)
	if isZone {
		return []string{loc}
	}
	zs := slices.Clone(regions[region])
	sort.Strings(zs)
	if len(zs) > 3 {
		zs = zs[:3]
	}
	return zs
}

// checkNodeLabels refuses, as GKE does, node labels whose keys GKE or
// Kubernetes manage: those under cloud.google.com/, and those under
// kubernetes.io/ or k8s.io/ (or a subdomain of either), with GKE's words.
// Keys are looked at in order, so that the error is the same every time.
func checkNodeLabels(labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		prefix, _, ok := strings.Cut(k, "/")
		if !ok {
			continue
		}
		under := func(d string) bool { return prefix == d || strings.HasSuffix(prefix, "."+d) }
		switch {
		case under("cloud.google.com"):
			return status.Errorf(codes.InvalidArgument, "Node labels with key %q are managed by GKE or Kubernetes and must not be manually specified.", k)
		case under("kubernetes.io"), under("k8s.io"):
			return status.Errorf(codes.InvalidArgument, "Applying kubernetes label is not allowed: %s.", k)
		}
	}
	return nil
}
