package substrates

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"cloud.google.com/go/firestore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/better-compute/kubernetes/shared/impersonate"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

const (
	testCaller  = "reconciler@bc-dev.iam.gserviceaccount.com"
	testAccount = "bc-provisioner@acme-prod.iam.gserviceaccount.com"
)

func TestAccessRefused(t *testing.T) {
	platform := &model.Cluster{Spec: model.ClusterSpec{Name: "own", Project: "bc-dev"}}
	tenant := &model.Cluster{Spec: model.ClusterSpec{Name: "prod", Project: "acme-prod", Impersonate: testAccount}}
	guidance := impersonate.Guidance("acme-prod", testAccount, testCaller)
	revoked := fmt.Errorf("list nodes: %w", &impersonate.AccessError{Guidance: guidance, Err: errors.New("PermissionDenied")})
	unauthorized := fmt.Errorf("list nodes: %w", apierrors.NewUnauthorized("Unauthorized"))
	forbidden := fmt.Errorf("apply: %w", apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "bcd-join", errors.New("no")))
	for _, c := range []struct {
		name    string
		cluster *model.Cluster
		err     error
		want    string
	}{
		{"no error", tenant, nil, ""},
		{"the grant revoked", tenant, revoked, "cluster prod: " + guidance},
		{"the tenant's account refused by the API", tenant, unauthorized,
			"cluster prod: Better Compute cannot act in project acme-prod as " + testAccount + ": the cluster's Kubernetes API refused it (Unauthorized); grant it the roles of Better Compute's tenant module (infra/tenant) in acme-prod"},
		{"forbidden to the tenant's account", tenant, forbidden, "cluster prod: Better Compute cannot act in project acme-prod as " + testAccount +
			": the cluster's Kubernetes API refused it (secrets \"bcd-join\" is forbidden: no); grant it the roles of Better Compute's tenant module (infra/tenant) in acme-prod"},
		{"the platform refused in its own project", platform, unauthorized, ""},
		{"a transient failure", tenant, errors.New("connection refused"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := accessRefused(c.cluster, c.err); got != c.want {
				t.Errorf("accessRefused = %q\nwant %q", got, c.want)
			}
		})
	}
}

// TestAccessRefusedAsTheCluster checks that a substrate whose cluster goes
// into error for the grant it was refused already shows the same error:
// it is announced once.
func TestAccessRefusedAsTheCluster(t *testing.T) {
	guidance := impersonate.Guidance("acme-prod", testAccount, testCaller)
	c := &model.Cluster{ID: "kcl_1", Active: true, Spec: model.ClusterSpec{Name: "prod", Project: "acme-prod", Impersonate: testAccount, Generation: 1},
		Status: model.ClusterStatus{State: resource.StateError, Message: guidance, ObservedGeneration: 1}}
	msg := accessRefused(c, &impersonate.AccessError{Guidance: guidance, Err: errors.New("denied")})
	s := model.Substrate{ID: "sub", Active: true, Spec: model.SubstrateSpec{Mode: resource.SubstrateCreate, Generation: 1},
		Status: model.SubstrateStatus{ClusterID: "kcl_1", State: resource.StateError, Message: msg, Announced: msg, ObservedGeneration: 1}}
	d := Plan(Input{Substrate: s, PreviousGone: true, Cluster: c}, planNow)
	if got := d.Substrate.Status.Message; got != msg || len(d.Events) != 0 {
		t.Errorf("the substrate of a cluster in error for the grant: %q with %d events, want %q as before, no event", got, len(d.Events), msg)
	}
}

// A run whose cluster refuses the account's identity (the tenant revoked
// its grant) leaves the substrate in error with the grant to make, once;
// it is ready again with the grant.
func TestRunAccessRefused(t *testing.T) {
	e := newRunEnv(t)
	guidance := impersonate.Guidance("p", testAccount, testCaller)
	e.kube.mu.Lock()
	e.kube.fail = fmt.Errorf("list the nodes: %w", &impersonate.AccessError{Guidance: guidance, Err: errors.New("PermissionDenied")})
	e.kube.mu.Unlock()
	e.run(t)
	want := "cluster own: " + guidance
	s := e.substrate(t)
	if s.Status.State != resource.StateError || s.Status.Message != want || s.Status.Announced != want {
		t.Fatalf("substrate with the grant revoked: %s %q (announced %q), want error %q", s.Status.State, s.Status.Message, s.Status.Announced, want)
	}
	// Runs go on, writing nothing; nor when the cluster shows the same.
	before := e.updated(t)
	e.run(t)
	if _, err := e.fs.Doc("tenants/acme/clusters/kcl_00000000000000000000000001").Update(context.Background(), []firestore.Update{
		{Path: "status.state", Value: resource.StateError}, {Path: "status.message", Value: guidance}}); err != nil {
		t.Fatal(err)
	}
	e.run(t)
	if after := e.updated(t); !after.Equal(before) {
		t.Errorf("a run with the grant still missing wrote the substrate again (updated %v, then %v)", before, after)
	}

	// The grant is back.
	if _, err := e.fs.Doc("tenants/acme/clusters/kcl_00000000000000000000000001").Update(context.Background(), []firestore.Update{
		{Path: "status.state", Value: resource.StateReady}, {Path: "status.message", Value: ""}}); err != nil {
		t.Fatal(err)
	}
	e.kube.mu.Lock()
	e.kube.fail = nil
	e.kube.mu.Unlock()
	e.run(t)
	if s := e.substrate(t); s.Status.State != resource.StateReady || s.Status.Announced != "" {
		t.Errorf("substrate with the grant back: %s %q, want ready", s.Status.State, s.Status.Message)
	}
}
