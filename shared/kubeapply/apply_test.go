package kubeapply

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// On an empty cluster, Apply creates the four objects, labelled, with the
// daemon's environment, node affinity and tolerations.
func TestApplyCreates(t *testing.T) {
	c, _ := testCluster(t)
	ctx := t.Context()
	d := validDesired()

	applied, err := c.Apply(ctx, d)
	if err != nil {
		t.Fatalf("Apply = %v", err)
	}
	wantChanged := []string{
		"Namespace better-compute-system",
		"ServiceAccount better-compute-system/bcd",
		"Secret better-compute-system/bcd-join",
		"DaemonSet better-compute-system/bcd",
	}
	if diff := cmp.Diff(wantChanged, applied.Changed); diff != "" {
		t.Errorf("Apply changed (-want +got):\n%s", diff)
	}

	objs := read(t, c)
	for i, o := range objs {
		if o == nil {
			t.Fatalf("%s absent after Apply", c.refs()[i])
		}
		if got := o.GetLabels()[LabelPool]; got != d.PoolID {
			t.Errorf("%s label %s = %q, want %q", c.refs()[i], LabelPool, got, d.PoolID)
		}
	}
	if got := string(objs[secretRef].(*corev1.Secret).Data[SecretKey]); got != d.Token {
		t.Errorf("Secret data[%s] = %q, want %q", SecretKey, got, d.Token)
	}

	ds := objs[daemonSetRef].(*appsv1.DaemonSet)
	podLabels := map[string]string{LabelPool: d.PoolID, "app.kubernetes.io/name": "bcd"}
	if diff := cmp.Diff(podLabels, ds.Spec.Selector.MatchLabels); diff != "" {
		t.Errorf("DaemonSet selector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(podLabels, ds.Spec.Template.Labels); diff != "" {
		t.Errorf("pod template labels (-want +got):\n%s", diff)
	}
	pod := ds.Spec.Template.Spec
	if pod.ServiceAccountName != ServiceAccountName {
		t.Errorf("serviceAccountName = %q, want %q", pod.ServiceAccountName, ServiceAccountName)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("containers = %d, want 1", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	if ctr.Name != "bcd" || ctr.Image != d.Image {
		t.Errorf("container = %s %s, want bcd %s", ctr.Name, ctr.Image, d.Image)
	}
	wantEnv := []corev1.EnvVar{
		{Name: "BCD_POOL_ID", Value: d.PoolID},
		{Name: "BCD_JOIN_URL", Value: d.JoinURL},
		{Name: "BCD_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "bcd-join"}, Key: "token"}}},
		{Name: "BCD_NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			APIVersion: "v1", FieldPath: "spec.nodeName"}}},
	}
	if diff := cmp.Diff(wantEnv, ctr.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	wantAffinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "cloud.google.com/gke-nodepool", Operator: corev1.NodeSelectorOpIn,
				Values: []string{"bc-pool-gpu-a100", "bc-pool-gpu-l4"},
			}}}},
		},
	}}
	if diff := cmp.Diff(wantAffinity, pod.Affinity); diff != "" {
		t.Errorf("affinity (-want +got):\n%s", diff)
	}
	wantTolerations := []corev1.Toleration{
		{Key: "dedicated", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoExecute},
		{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule},
		{Key: "team", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectPreferNoSchedule},
	}
	if diff := cmp.Diff(wantTolerations, pod.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
}

// Applying what the cluster already holds writes nothing: no object's
// resourceVersion moves. A changed image changes the DaemonSet alone.
func TestApplyAgain(t *testing.T) {
	c, _ := testCluster(t)
	ctx := t.Context()
	d := validDesired()
	tests := []struct {
		name        string
		change      func(*Desired)
		wantChanged []string
	}{
		{"same", func(*Desired) {}, nil},
		{"without token", func(d *Desired) { d.Token = "" }, nil},
		{"reordered and repeated node pools and taints", func(d *Desired) {
			slices.Reverse(d.NodePools)
			d.NodePools = append(d.NodePools, d.NodePools[0])
			slices.Reverse(d.Tolerations)
			d.Tolerations = append(d.Tolerations, d.Tolerations[1])
		}, nil},
		{"new image", func(d *Desired) { d.Image = "example.com/bcd:2"; d.Token = "" }, []string{"DaemonSet better-compute-system/bcd"}},
		{"new token", func(d *Desired) { d.Token = "another" }, []string{"Secret better-compute-system/bcd-join"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wipe(t, c)
			if _, err := c.Apply(ctx, d); err != nil {
				t.Fatalf("first Apply = %v", err)
			}
			before := versions(read(t, c))
			again := validDesired()
			tt.change(&again)
			applied, err := c.Apply(ctx, again)
			if err != nil {
				t.Fatalf("Apply again = %v", err)
			}
			if diff := cmp.Diff(tt.wantChanged, applied.Changed); diff != "" {
				t.Errorf("Apply again changed (-want +got):\n%s", diff)
			}
			after := versions(read(t, c))
			for i, r := range c.refs() {
				moved := before[i] != after[i]
				if want := slices.Contains(tt.wantChanged, r.String()); moved != want {
					t.Errorf("%s resourceVersion %s -> %s, want changed %v", r, before[i], after[i], want)
				}
			}
		})
	}
}

// An object changed between Apply's check and its write is not overwritten:
// the write is held to the resourceVersion the check read.
func TestApplyHeldToResourceVersionRead(t *testing.T) {
	c, _ := testCluster(t)
	ctx := t.Context()
	d := validDesired()
	if _, err := c.Apply(ctx, d); err != nil {
		t.Fatal(err)
	}
	stale := read(t, c)[daemonSetRef].GetResourceVersion()
	d.Image = "example.com/bcd:2"
	if _, err := c.Apply(ctx, d); err != nil {
		t.Fatal(err)
	}
	d.Image = "example.com/bcd:3"
	objs, err := build(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.refs()[daemonSetRef].apply(ctx, objs, stale); !apierrors.IsConflict(err) {
		t.Errorf("apply DaemonSet at a stale resourceVersion = %v, want Conflict", err)
	}
}

// An object of a substrate name that is not the pool's stops Apply before
// any write, names the object, and is left exactly as it was.
func TestApplyRefusesForeign(t *testing.T) {
	c, _ := testCluster(t)
	ctx := t.Context()
	tests := []struct {
		name    string
		setup   func(t *testing.T)
		want    []ForeignError // Pool is always pool-gpu
		foreign int            // the index in refs of a foreign object
	}{
		{
			name: "DaemonSet without the label",
			setup: func(t *testing.T) {
				createNamespace(t, c, map[string]string{LabelPool: "pool-gpu"})
				createDaemonSet(t, c, nil)
			},
			want:    []ForeignError{{Kind: "DaemonSet", Namespace: Namespace, Name: "bcd"}},
			foreign: daemonSetRef,
		},
		{
			name: "DaemonSet of another pool",
			setup: func(t *testing.T) {
				createNamespace(t, c, map[string]string{LabelPool: "pool-gpu"})
				createDaemonSet(t, c, map[string]string{LabelPool: "pool-other"})
			},
			want:    []ForeignError{{Kind: "DaemonSet", Namespace: Namespace, Name: "bcd", Found: "pool-other"}},
			foreign: daemonSetRef,
		},
		{
			name:    "Namespace without the label",
			setup:   func(t *testing.T) { createNamespace(t, c, map[string]string{"team": "infra"}) },
			want:    []ForeignError{{Kind: "Namespace", Name: Namespace}},
			foreign: namespaceRef,
		},
		{
			name: "Secret of another pool, and the Namespace",
			setup: func(t *testing.T) {
				createNamespace(t, c, map[string]string{LabelPool: "pool-b"})
				createSecret(t, c, map[string]string{LabelPool: "pool-b"}, "b's token")
			},
			want: []ForeignError{
				{Kind: "Namespace", Name: Namespace, Found: "pool-b"},
				{Kind: "Secret", Namespace: Namespace, Name: "bcd-join", Found: "pool-b"},
			},
			foreign: secretRef,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wipe(t, c)
			tt.setup(t)
			before := read(t, c)

			_, err := c.Apply(ctx, validDesired())
			var want []*ForeignError
			for _, fe := range tt.want {
				fe.Pool = "pool-gpu"
				want = append(want, &fe)
			}
			if diff := cmp.Diff(want, foreignErrors(err)); diff != "" {
				t.Errorf("Apply = %v; foreign objects (-want +got):\n%s", err, diff)
			}
			var fe *ForeignError
			if !errors.As(err, &fe) {
				t.Errorf("errors.As(%v, *ForeignError) = false, want true", err)
			}

			after := read(t, c)
			if diff := cmp.Diff(mustJSON(t, before), mustJSON(t, after)); diff != "" {
				t.Errorf("objects after a refused Apply (-before +after):\n%s", diff)
			}
			if after[tt.foreign] == nil {
				t.Errorf("foreign %s gone after Apply", c.refs()[tt.foreign])
			}
		})
	}
}

// Without a token, Apply checks that the Secret holds one, and says so
// distinctly when it does not; applying with a newly minted token then
// writes it, whoever emptied the Secret.
func TestApplySecretCheck(t *testing.T) {
	c, _ := testCluster(t)
	ctx := t.Context()
	secrets := c.client.CoreV1().Secrets(Namespace)
	tests := []struct {
		name    string
		change  func(t *testing.T)
		missing bool
	}{
		{"present", func(*testing.T) {}, false},
		{"deleted", func(t *testing.T) {
			if err := secrets.Delete(ctx, SecretName, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"emptied", func(t *testing.T) { updateSecretData(t, c, map[string][]byte{SecretKey: {}}) }, true},
		{"token key removed", func(t *testing.T) { updateSecretData(t, c, map[string][]byte{"other": []byte("x")}) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wipe(t, c)
			d := validDesired()
			if _, err := c.Apply(ctx, d); err != nil {
				t.Fatal(err)
			}
			tt.change(t)
			before := read(t, c)

			d.Token = ""
			d.Image = "example.com/bcd:2"
			_, err := c.Apply(ctx, d)
			if got := errors.Is(err, ErrJoinSecretMissing); got != tt.missing {
				t.Fatalf("Apply without token = %v; ErrJoinSecretMissing %v, want %v", err, got, tt.missing)
			}
			if !tt.missing {
				if err != nil {
					t.Fatalf("Apply without token = %v", err)
				}
				return
			}
			if diff := cmp.Diff(mustJSON(t, before), mustJSON(t, read(t, c))); diff != "" {
				t.Errorf("objects after Apply refused for the Secret (-before +after):\n%s", diff)
			}

			d.Token = "minted again"
			if _, err := c.Apply(ctx, d); err != nil {
				t.Fatalf("Apply with a new token = %v", err)
			}
			s := read(t, c)[secretRef].(*corev1.Secret)
			if got := string(s.Data[SecretKey]); got != d.Token {
				t.Errorf("Secret data[%s] after Apply with a new token = %q, want %q", SecretKey, got, d.Token)
			}
		})
	}
}

// read returns the substrate's objects as the administrator sees them,
// indexed as refs, nil when absent.
func read(t *testing.T, c *Cluster) []metav1.Object {
	t.Helper()
	var objs []metav1.Object
	for _, r := range c.refs() {
		o, err := r.get(context.Background())
		if err != nil {
			t.Fatalf("read %s: %v", r, err)
		}
		objs = append(objs, o)
	}
	return objs
}

func versions(objs []metav1.Object) []string {
	var rvs []string
	for _, o := range objs {
		rv := "absent"
		if o != nil {
			rv = o.GetResourceVersion()
		}
		rvs = append(rvs, rv)
	}
	return rvs
}

// foreignErrors returns every *ForeignError in err's tree, in order.
func foreignErrors(err error) []*ForeignError {
	var fes []*ForeignError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *ForeignError:
			fes = append(fes, e)
		case interface{ Unwrap() []error }:
			for _, err := range e.Unwrap() {
				walk(err)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return fes
}

func createNamespace(t *testing.T, c *Cluster, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace, Labels: labels}}
	if _, err := c.client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
}

// createDaemonSet makes a DaemonSet bcd as someone else would: its own
// selector, image and field manager.
func createDaemonSet(t *testing.T, c *Cluster, labels map[string]string) {
	t.Helper()
	sel := map[string]string{"app": "someone-elses-bcd"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: DaemonSetName, Namespace: Namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "other", Image: "example.com/other:1",
				}}},
			},
		},
	}
	if _, err := c.client.AppsV1().DaemonSets(Namespace).Create(context.Background(), ds, metav1.CreateOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatalf("create daemonset: %v", err)
	}
}

func createSecret(t *testing.T, c *Cluster, labels map[string]string, token string) {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: SecretName, Namespace: Namespace, Labels: labels},
		Data:       map[string][]byte{SecretKey: []byte(token)},
	}
	if _, err := c.client.CoreV1().Secrets(Namespace).Create(context.Background(), s, metav1.CreateOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatalf("create secret: %v", err)
	}
}

func createServiceAccount(t *testing.T, c *Cluster, labels map[string]string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccountName, Namespace: Namespace, Labels: labels}}
	if _, err := c.client.CoreV1().ServiceAccounts(Namespace).Create(context.Background(), sa, metav1.CreateOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatalf("create serviceaccount: %v", err)
	}
}

func updateSecretData(t *testing.T, c *Cluster, data map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	secrets := c.client.CoreV1().Secrets(Namespace)
	s, err := secrets.Get(ctx, SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data = data
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatalf("update secret: %v", err)
	}
}

// Check tells, reading only, whether Apply has anything to do: it agrees
// with what Apply reports after each change.
func TestCheck(t *testing.T) {
	c, _ := testCluster(t)
	ctx := t.Context()
	check := func(d Desired) bool {
		t.Helper()
		ok, err := c.Check(ctx, d)
		if err != nil {
			t.Fatalf("Check = %v", err)
		}
		return ok
	}
	d := validDesired()
	wipe(t, c)
	if check(d) {
		t.Fatal("Check of an empty cluster = true")
	}
	if _, err := c.Apply(ctx, d); err != nil {
		t.Fatal(err)
	}
	before := versions(read(t, c))
	if !check(d) {
		t.Fatal("Check after Apply = false")
	}
	if after := versions(read(t, c)); !slices.Equal(before, after) {
		t.Errorf("Check wrote: resourceVersions %v then %v", before, after)
	}
	reordered := validDesired()
	slices.Reverse(reordered.NodePools)
	reordered.Token = "not checked"
	if !check(reordered) {
		t.Error("Check of the same objects, node pools reordered, other token = false")
	}
	other := validDesired()
	other.Image = "example.com/bcd:2"
	if check(other) {
		t.Error("Check of another image = true")
	}
	updateSecretData(t, c, map[string][]byte{})
	if check(d) {
		t.Error("Check with an emptied Secret = true")
	}
}
