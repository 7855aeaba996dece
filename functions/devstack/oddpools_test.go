package devstack_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// substratePoolIDAnnotation holds a substrate's whole pool ID on its
// objects (API.md §9).
const substratePoolIDAnnotation = "better-compute.dev/substrate-pool-id"

// TestSubstrateOddPoolIDs serves pools whose IDs the pools module's
// pattern accepts but that are not Kubernetes label values: a colon, no
// letter or digit at either end, 100 characters. One after the other
// adopts a tenant's cluster: each substrate is ready with its nodes
// joined, as its plan said it would be, its objects carry one label value
// (selecting the DaemonSet's pods) and the whole ID, and its teardown
// finds and removes them, so that the next pool's substrate finds nothing
// in its way.
func TestSubstrateOddPoolIDs(t *testing.T) {
	t.Parallel()
	e := kubeEnv(t, nil)
	cl := e.api.createCluster(t, "tenant", poolSpec("own", 1))
	cl = e.api.waitCluster(t, cl.ID, resource.StateReady, nil)
	cs := adminClient(t, e, cl.ID)
	long := strings.Repeat("Long.ID-", 12) + "0123" // 100 characters
	for _, id := range []string{"team:x", "__x__", long} {
		t.Run(fmt.Sprintf("%.12s", id), func(t *testing.T) {
			policy := adoptPolicy(id, 1, cl.ID, flavor("cpu", 1))
			_, plan := planOf(t, e.api, policy)
			if plan.Substrate.State != resource.StateReady {
				t.Errorf("plan of pool %q: substrate %s %q, want ready", id, plan.Substrate.State, plan.Substrate.Message)
			}
			putPool(t, e, policy)
			// 1 node per zone of us-central1.
			s := e.api.waitSubstrate(t, id, "ready with 3 nodes joined", readyWith(3))
			if s.PoolID != id {
				t.Errorf("substrate's poolId = %q, want %q", s.PoolID, id)
			}
			value := poolObjects(t, cs, id)
			if id == "team:x" && !strings.HasPrefix(value, "team-x-") {
				t.Errorf("label value of %q = %q, want team-x-<hash>", id, value)
			}

			archivePool(t, e, id, 2)
			wait.For(t, "substrate deleted", func() (bool, string) {
				list, err := e.api.substrates(id)
				return err == nil && len(list) == 0, jsonOf(list)
			})
			ctx := context.Background()
			for kind, get := range map[string]func() (metav1.Object, error){
				"DaemonSet": func() (metav1.Object, error) {
					return cs.AppsV1().DaemonSets("better-compute-system").Get(ctx, "bcd", metav1.GetOptions{})
				},
				"Secret": func() (metav1.Object, error) {
					return cs.CoreV1().Secrets("better-compute-system").Get(ctx, "bcd-join", metav1.GetOptions{})
				},
			} {
				o, err := get()
				if err == nil && o.GetDeletionTimestamp() == nil {
					t.Errorf("%s outlived the substrate of %q", kind, id)
				} else if err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}
		})
	}
}

// poolObjects checks that the substrate's four objects carry one label
// value, a Kubernetes label value, and the whole pool ID in their
// annotation, and that the DaemonSet selects its pods by that value; it
// returns the value.
func poolObjects(t *testing.T, cs *kubernetes.Clientset, poolID string) string {
	t.Helper()
	ctx := context.Background()
	const ns = "better-compute-system"
	var objs []metav1.Object
	add := func(o metav1.Object, err error) {
		if err != nil {
			t.Fatalf("read the substrate's objects: %v", err)
		}
		objs = append(objs, o)
	}
	add(cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}))
	add(cs.CoreV1().ServiceAccounts(ns).Get(ctx, "bcd", metav1.GetOptions{}))
	add(cs.CoreV1().Secrets(ns).Get(ctx, "bcd-join", metav1.GetOptions{}))
	ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "bcd", metav1.GetOptions{})
	add(ds, err)
	value := objs[0].GetLabels()[substrateLabel]
	if msgs := validation.IsValidLabelValue(value); value == "" || len(msgs) > 0 {
		t.Errorf("label %s of pool %q = %q, not a label value: %v", substrateLabel, poolID, value, msgs)
	}
	for _, o := range objs {
		if got := o.GetLabels()[substrateLabel]; got != value {
			t.Errorf("%s: label %s = %q, want %q as on the Namespace", o.GetName(), substrateLabel, got, value)
		}
		if got := o.GetAnnotations()[substratePoolIDAnnotation]; got != poolID {
			t.Errorf("%s: annotation %s = %q, want %q", o.GetName(), substratePoolIDAnnotation, got, poolID)
		}
	}
	if got := ds.Spec.Selector.MatchLabels[substrateLabel]; got != value {
		t.Errorf("DaemonSet selector %s = %q, want %q", substrateLabel, got, value)
	}
	return value
}
