package kubeapply

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/better-compute/kubernetes/shared/resource"
)

func validDesired() Desired {
	return Desired{
		PoolID:    "pool-gpu",
		Image:     "example.com/bcd:1",
		JoinURL:   "https://api.example.com/api/compute/kubernetesSubstrates/join",
		NodePools: []string{"bc-pool-gpu-l4", "bc-pool-gpu-a100"},
		Tolerations: []resource.Taint{
			{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"},
			{Key: "team", Value: "ml", Effect: "PreferNoSchedule"},
			{Key: "dedicated", Effect: "NoExecute"},
		},
		Token: "t0ken",
	}
}

// A Desired the API server would refuse is refused before any write.
func TestBuildValidates(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Desired)
		ok     bool
	}{
		{"valid", func(*Desired) {}, true},
		{"no token is valid", func(d *Desired) { d.Token = "" }, true},
		{"no tolerations is valid", func(d *Desired) { d.Tolerations = nil }, true},
		{"empty pool ID", func(d *Desired) { d.PoolID = "" }, false},
		{"pool ID not a label value", func(d *Desired) { d.PoolID = "team:gpu" }, true},
		{"pool ID of no letter or digit", func(d *Desired) { d.PoolID = "__" }, true},
		{"pool ID too long for a label", func(d *Desired) { d.PoolID = strings.Repeat("p", 128) }, true},
		{"no image", func(d *Desired) { d.Image = "" }, false},
		{"no join URL", func(d *Desired) { d.JoinURL = "" }, false},
		{"no node pools", func(d *Desired) { d.NodePools = nil }, false},
		{"empty node pool", func(d *Desired) { d.NodePools = []string{"a", ""} }, false},
		{"GKE effect spelling", func(d *Desired) { d.Tolerations[0].Effect = "NO_SCHEDULE" }, false},
		{"empty effect", func(d *Desired) { d.Tolerations[0].Effect = "" }, false},
		{"bad taint key", func(d *Desired) { d.Tolerations[0].Key = "a b" }, false},
		{"bad taint value", func(d *Desired) { d.Tolerations[0].Value = "a b" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := validDesired()
			tt.change(&d)
			_, err := build(d)
			if (err == nil) != tt.ok {
				t.Errorf("build(%+v) = %v, want ok %v", d, err, tt.ok)
			}
		})
	}
}

// Every object carries the pool's label value and its whole ID; the
// DaemonSet selects its pods by that value.
func TestBuildLabelsOddPoolIDs(t *testing.T) {
	for _, id := range []string{"pool-gpu", "team:x", "__x__", ".", strings.Repeat("x", 100)} {
		t.Run(id, func(t *testing.T) {
			d := validDesired()
			d.PoolID = id
			o, err := build(d)
			if err != nil {
				t.Fatalf("build = %v", err)
			}
			want := PoolLabel(id)
			for name, m := range map[string]*metav1ac.ObjectMetaApplyConfiguration{
				"Namespace": o.namespace.ObjectMetaApplyConfiguration, "ServiceAccount": o.serviceAccount.ObjectMetaApplyConfiguration,
				"Secret": o.secret.ObjectMetaApplyConfiguration, "DaemonSet": o.daemonSet.ObjectMetaApplyConfiguration,
			} {
				if m.Labels[LabelPool] != want || m.Annotations[AnnotationPoolID] != id {
					t.Errorf("%s: label %q, annotation %q; want %q, %q", name, m.Labels[LabelPool], m.Annotations[AnnotationPoolID], want, id)
				}
			}
			if got := o.daemonSet.Spec.Selector.MatchLabels[LabelPool]; got != want {
				t.Errorf("DaemonSet selector %s = %q, want %q", LabelPool, got, want)
			}
			if got := o.daemonSet.Spec.Template.Labels[LabelPool]; got != want {
				t.Errorf("pod template label %s = %q, want %q", LabelPool, got, want)
			}
		})
	}
}

// Taints take Kubernetes' effect spelling and tolerate exactly the taint;
// order and repeats of taints and node pools do not change the objects, so
// that reordered flavors are no change for the API server.
func TestBuildTolerationsAndOrder(t *testing.T) {
	d := validDesired()
	o, err := build(d)
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1ac.TolerationApplyConfiguration{
		{Key: new("dedicated"), Operator: new(corev1.TolerationOpEqual), Value: new(""), Effect: new(corev1.TaintEffectNoExecute)},
		{Key: new("nvidia.com/gpu"), Operator: new(corev1.TolerationOpEqual), Value: new("present"), Effect: new(corev1.TaintEffectNoSchedule)},
		{Key: new("team"), Operator: new(corev1.TolerationOpEqual), Value: new("ml"), Effect: new(corev1.TaintEffectPreferNoSchedule)},
	}
	if diff := cmp.Diff(want, o.daemonSet.Spec.Template.Spec.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}

	shuffled := d
	shuffled.NodePools = []string{"bc-pool-gpu-a100", "bc-pool-gpu-l4", "bc-pool-gpu-a100"}
	shuffled.Tolerations = []resource.Taint{d.Tolerations[2], d.Tolerations[0], d.Tolerations[1], d.Tolerations[0]}
	o2, err := build(shuffled)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := mustJSON(t, o.daemonSet), mustJSON(t, o2.daemonSet); a != b {
		t.Errorf("DaemonSet of reordered, repeated node pools and taints differs:\n%s\n%s", a, b)
	}
}

// The Secret is configured only when there is a token to write: applying
// it without one would drop the token (the field manager would own the
// data no longer).
func TestBuildSecretOnlyWithToken(t *testing.T) {
	for _, tok := range []string{"", "t0ken"} {
		d := validDesired()
		d.Token = tok
		o, err := build(d)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := o.secret != nil, tok != ""; got != want {
			t.Errorf("build with token %q: Secret configured %v, want %v", tok, got, want)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
