package gke

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// bcd reads its four variables as the kubelet gives them, and does not
// start (the simulator joins nothing) when one is missing: a product that
// misspells a name, a Secret or its key fails against the simulator.
func TestReadBCDConfig(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gke-c1-a-0123abcd-x1y2"}}
	secrets := map[string]*corev1.Secret{
		"bcd-join": {Data: map[string][]byte{"token": []byte("tok1")}},
		"empty":    {Data: map[string][]byte{"token": nil}},
	}
	getSecret := func(_ context.Context, name string) (*corev1.Secret, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	tokenFrom := func(secret, key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}
	}
	fromField := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	// env is bcd's environment as its contract has it, with change
	// applied to it.
	env := func(change func([]corev1.EnvVar) []corev1.EnvVar) []corev1.EnvVar {
		e := []corev1.EnvVar{
			{Name: "BCD_POOL_ID", Value: "pool-gpu"},
			{Name: "BCD_JOIN_URL", Value: "http://join.example/join"},
			{Name: "BCD_TOKEN", ValueFrom: tokenFrom("bcd-join", "token")},
			{Name: "BCD_NODE_NAME", ValueFrom: fromField("spec.nodeName")},
		}
		return change(e)
	}
	same := func(e []corev1.EnvVar) []corev1.EnvVar { return e }
	rename := func(i int, name string) func([]corev1.EnvVar) []corev1.EnvVar {
		return func(e []corev1.EnvVar) []corev1.EnvVar { e[i].Name = name; return e }
	}
	tests := []struct {
		name    string
		env     []corev1.EnvVar
		want    bcdConfig // when wantErr is empty
		node    string    // the name bcd's join call gives node
		wantErr string
	}{
		{name: "the contract", env: env(same),
			want: bcdConfig{url: "http://join.example/join", poolID: "pool-gpu", token: "tok1", nodeNameOfPod: true}, node: node.Name},
		{name: "a node name as a value", env: env(func(e []corev1.EnvVar) []corev1.EnvVar {
			e[3] = corev1.EnvVar{Name: "BCD_NODE_NAME", Value: "elsewhere"}
			return e
		}), want: bcdConfig{url: "http://join.example/join", poolID: "pool-gpu", token: "tok1", nodeName: "elsewhere"}, node: "elsewhere"},
		{name: "the last of a repeated name wins", env: env(func(e []corev1.EnvVar) []corev1.EnvVar {
			return append(e, corev1.EnvVar{Name: "BCD_POOL_ID", Value: "pool-b"})
		}), want: bcdConfig{url: "http://join.example/join", poolID: "pool-b", token: "tok1", nodeNameOfPod: true}, node: node.Name},
		{name: "pool ID misspelt", env: env(rename(0, "BCD_POOL")), wantErr: "has no BCD_POOL_ID"},
		{name: "join URL misspelt", env: env(rename(1, "BCD_URL")), wantErr: "has no BCD_JOIN_URL"},
		{name: "token misspelt", env: env(rename(2, "BCD_JOIN_TOKEN")), wantErr: "has no BCD_TOKEN"},
		{name: "node name misspelt", env: env(rename(3, "NODE_NAME")), wantErr: "has no BCD_NODE_NAME"},
		{name: "node name of another field", env: env(func(e []corev1.EnvVar) []corev1.EnvVar {
			e[3].ValueFrom = fromField("metadata.name")
			return e
		}), wantErr: "has no BCD_NODE_NAME"},
		{name: "another Secret", env: env(func(e []corev1.EnvVar) []corev1.EnvVar {
			e[2].ValueFrom = tokenFrom("bcd-token", "token")
			return e
		}), wantErr: `secret bcd-token: secrets "bcd-token" not found`},
		{name: "another key", env: env(func(e []corev1.EnvVar) []corev1.EnvVar {
			e[2].ValueFrom = tokenFrom("bcd-join", "join-token")
			return e
		}), wantErr: `secret bcd-join has no key "join-token"`},
		{name: "an empty token", env: env(func(e []corev1.EnvVar) []corev1.EnvVar {
			e[2].ValueFrom = tokenFrom("empty", "token")
			return e
		}), wantErr: "has no BCD_TOKEN"},
		{name: "nothing", env: nil, wantErr: "has no BCD_JOIN_URL or BCD_POOL_ID or BCD_TOKEN or BCD_NODE_NAME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := &appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Name: "bcd", Namespace: "better-compute-system"},
				Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "bcd", Env: tt.env}},
				}}},
			}
			got, err := readBCDConfig(context.Background(), ds, getSecret)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("readBCDConfig = %+v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("readBCDConfig: %v", err)
			}
			if got != tt.want {
				t.Errorf("readBCDConfig = %+v, want %+v", got, tt.want)
			}
			if n := got.nodeNameOn(node); n != tt.node {
				t.Errorf("node name on %s = %q, want %q", node.Name, n, tt.node)
			}
		})
	}
}

// A DaemonSet with no container runs no bcd.
func TestReadBCDConfigNoContainer(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "bcd", Namespace: "better-compute-system"}}
	if _, err := readBCDConfig(context.Background(), ds, nil); err == nil || !strings.Contains(err.Error(), "no container") {
		t.Errorf("readBCDConfig = %v, want the missing container named", err)
	}
}

// The simulator posts bcd's join tokens only to the join method it was
// given: a DaemonSet that names another URL (a page, another host, the
// method with a query) joins no node.
func TestCheckJoinURL(t *testing.T) {
	join := "http://127.0.0.1:8080/api/compute/kubernetesSubstrates/join"
	for _, tt := range []struct {
		url     string
		allowed []string
		ok      bool
	}{
		{join, []string{join}, true},
		{"http://anything.example/join", nil, true}, // none given: any
		{"http://evil.example/collect", []string{join}, false},
		{join + "?x=1", []string{join}, false},
		{"http://127.0.0.1:8081/api/compute/kubernetesSubstrates/join", []string{join}, false},
		{"http://127.0.0.1:8080/dev/token", []string{join}, false},
	} {
		if err := checkJoinURL(tt.url, tt.allowed); (err == nil) != tt.ok {
			t.Errorf("checkJoinURL(%q, %q) = %v, want ok %v", tt.url, tt.allowed, err, tt.ok)
		}
	}
}
