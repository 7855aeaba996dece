package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/functions/devstack"
	"github.com/better-compute/kubernetes/shared/apidoc"
	"github.com/better-compute/kubernetes/shared/apidoc/apidoctest"
	"github.com/better-compute/kubernetes/shared/client"
	"github.com/better-compute/kubernetes/shared/wait"
)

// The Go client (shared/client) against the devstack, as bc uses it:
// every method, its errors and its waits, every answer checked against
// the document. The devstack is bc's tests' (devStack).

// checkingTransport checks every answer of the API against the document:
// a 200 against the method's response schema, any other against the
// error envelope. It records the request bodies it sent.
type checkingTransport struct {
	t    *testing.T
	mu   sync.Mutex
	sent map[string][][]byte // by path
}

func (c *checkingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	c.mu.Lock()
	if c.sent == nil {
		c.sent = map[string][][]byte{}
	}
	c.sent[req.URL.Path] = append(c.sent[req.URL.Path], body)
	c.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	ptr := "/components/schemas/Error"
	if resp.StatusCode == http.StatusOK {
		ptr = ""
		for _, op := range apidoc.Operations() {
			if op.Path() == req.URL.Path {
				ptr = "/components/schemas/" + op.Response
			}
		}
	}
	if ptr != "" {
		if err := apidoctest.Validate(apidoctest.OpenAPI, ptr, data); err != nil {
			c.t.Errorf("answer %d of %s does not match the document's %s: %v\n%s", resp.StatusCode, req.URL.Path, ptr, err, data)
		}
	}
	return resp, nil
}

func (c *checkingTransport) bodies(path string) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent[path]
}

// newClient returns a client of the stack for alice (admin of acme) whose
// answers are checked against the document.
func newClient(t *testing.T, s *devstack.Stack, opts ...client.Option) (*client.Client, *checkingTransport) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok, err := client.DevToken(ctx, s.URL, "alice")
	if err != nil {
		t.Fatalf("DevToken: %v", err)
	}
	tr := &checkingTransport{t: t}
	opts = append([]client.Option{client.WithToken(tok), client.WithHTTPClient(&http.Client{Transport: tr})}, opts...)
	c, err := client.New(s.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c, tr
}

var clusterSeq atomic.Int64

func clusterName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, clusterSeq.Add(1)) }

func fastWait(seen *[]client.Observation) *client.WaitOptions {
	return &client.WaitOptions{Interval: 20 * time.Millisecond, MaxInterval: 200 * time.Millisecond, OnChange: func(o client.Observation) {
		if seen != nil {
			*seen = append(*seen, o)
		}
	}}
}

// TestClientLifecycle drives every method of the client against the devstack,
// waiting for each change to converge, and checks every answer against
// the document.
func TestClientLifecycle(t *testing.T) {
	t.Parallel()
	s := devStack(t)
	c, tr := newClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), waitTime)
	defer cancel()

	cl, err := c.CreateCluster(ctx, client.CreateClusterRequest{
		TenantID: "acme", PoolID: "pool-dev", Name: clusterName("life"), Mode: client.ModeStandard, Region: "us-central1",
		NodePools: []client.NodePoolSpec{{Name: "default", MachineType: "e2-standard-4", NodeCount: 1}},
	})
	if err != nil {
		t.Fatalf("CreateCluster: %v", err)
	}
	if cl.State != client.StatePending {
		t.Errorf("CreateCluster state = %s, want pending", cl.State)
	}
	var seen []client.Observation
	cl, err = c.WaitCluster(ctx, "acme", cl.ID, client.StateReady, fastWait(&seen))
	if err != nil {
		t.Fatalf("WaitCluster ready: %v", err)
	}
	// The first run may start the cluster's provisioning before the first
	// look: what comes first is pending or provisioning.
	if cl.State != client.StateReady || len(seen) < 2 || (seen[0].State != client.StatePending && seen[0].State != client.StateProvisioning) || seen[len(seen)-1].State != client.StateReady {
		t.Errorf("WaitCluster = %s, observed %v; want pending or provisioning first and ready last", cl.State, seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].Elapsed < seen[i-1].Elapsed || seen[i] == seen[i-1] {
			t.Errorf("observations %v: want changes only, in time order", seen)
		}
	}

	got, err := c.GetCluster(ctx, "acme", cl.ID)
	if err != nil || got.ID != cl.ID || got.Endpoint == "" {
		t.Fatalf("GetCluster = %+v, %v; want the ready cluster with an endpoint", got, err)
	}
	var listed bool
	for x, err := range c.AllClusters(ctx, "acme", "pool-dev") {
		if err != nil {
			t.Fatalf("AllClusters: %v", err)
		}
		listed = listed || x.ID == cl.ID
	}
	if !listed {
		t.Errorf("AllClusters does not yield %s", cl.ID)
	}

	p, err := c.CreateNodePool(ctx, client.CreateNodePoolRequest{TenantID: "acme", ClusterID: cl.ID, NodePoolSpec: client.NodePoolSpec{
		Name: "gpu", MachineType: "g2-standard-8", NodeCount: 1, Accelerators: &client.Accelerators{Type: "nvidia-l4", Count: 1},
		Labels: map[string]string{"team": "ml"}, Taints: []client.Taint{{Key: "gpu", Value: "true", Effect: "NoSchedule"}},
	}})
	if err != nil {
		t.Fatalf("CreateNodePool: %v", err)
	}
	sent := tr.bodies("/api/compute/kubernetesNodePools/create")
	var body struct{ IdempotencyKey string }
	if len(sent) != 1 || json.Unmarshal(sent[0], &body) != nil || body.IdempotencyKey == "" {
		t.Errorf("CreateNodePool sent %q, want one body with an idempotencyKey", sent)
	}
	if p, err = c.WaitNodePool(ctx, "acme", cl.ID, p.ID, client.StateReady, fastWait(nil)); err != nil {
		t.Fatalf("WaitNodePool ready: %v", err)
	}

	two := 2
	if p, err = c.UpdateNodePool(ctx, client.UpdateNodePoolRequest{TenantID: "acme", ClusterID: cl.ID, NodePoolID: p.ID, NodeCount: &two,
		Autoscaling: &client.Autoscaling{MinNodes: 1, MaxNodes: 3}}); err != nil {
		t.Fatalf("UpdateNodePool: %v", err)
	}
	if p.Version != 2 || p.Autoscaling == nil || p.NodeCount != 2 {
		t.Errorf("UpdateNodePool = version %d nodeCount %d autoscaling %v, want 2, 2, 1-3", p.Version, p.NodeCount, p.Autoscaling)
	}
	if _, err = c.WaitNodePool(ctx, "acme", cl.ID, p.ID, client.StateReady, fastWait(nil)); err != nil {
		t.Fatalf("WaitNodePool after update: %v", err)
	}
	if p, err = c.UpdateNodePool(ctx, client.UpdateNodePoolRequest{TenantID: "acme", ClusterID: cl.ID, NodePoolID: p.ID, DisableAutoscaling: true}); err != nil || p.Autoscaling != nil {
		t.Fatalf("UpdateNodePool autoscaling off = %+v, %v; want no autoscaling", p, err)
	}
	pools, err := c.ListNodePools(ctx, "acme", cl.ID)
	if err != nil || len(pools) != 2 {
		t.Fatalf("ListNodePools = %d pools, %v; want 2", len(pools), err)
	}

	if p, err = c.DeleteNodePool(ctx, "acme", cl.ID, p.ID); err != nil || p.State != client.StateDeleting {
		t.Fatalf("DeleteNodePool = %+v, %v; want deleting", p, err)
	}
	if p, err = c.WaitNodePool(ctx, "acme", cl.ID, p.ID, client.StateDeleted, fastWait(nil)); err != nil || p.State != client.StateDeleted {
		t.Fatalf("WaitNodePool deleted = %+v, %v", p, err)
	}
	if cl, err = c.DeleteCluster(ctx, "acme", cl.ID); err != nil || cl.State != client.StateDeleting {
		t.Fatalf("DeleteCluster = %+v, %v; want deleting", cl, err)
	}
	if cl, err = c.WaitCluster(ctx, "acme", cl.ID, client.StateDeleted, fastWait(nil)); err != nil || cl.State != client.StateDeleted {
		t.Fatalf("WaitCluster deleted = %+v, %v", cl, err)
	}
	if _, err := c.GetCluster(ctx, "acme", cl.ID); !client.IsCode(err, client.CodeNotFound) {
		t.Errorf("GetCluster of a deleted cluster = %v, want NOT_FOUND", err)
	}
}

// TestClientErrorsAreValues checks the errors of the API arrive as *client.Error
// with their code, status, field details and request ID.
func TestClientErrorsAreValues(t *testing.T) {
	t.Parallel()
	s := devStack(t)
	c, _ := newClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), waitTime)
	defer cancel()

	_, err := c.CreateNodePool(ctx, client.CreateNodePoolRequest{TenantID: "acme", ClusterID: "kcl_01jd8x4k2m9q7v3w5y6z0a1b2c",
		NodePoolSpec: client.NodePoolSpec{Name: "Bad_Name", MachineType: "e2-standard-4", NodeCount: 1001}})
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("CreateNodePool with bad fields = %v, want a *client.Error", err)
	}
	fields := map[string]bool{}
	for _, d := range e.Details {
		fields[d.Field] = true
	}
	if e.Code != client.CodeInvalidInput || e.StatusCode != 400 || !fields["name"] || !fields["nodeCount"] || e.RequestID == "" {
		t.Errorf("error = %+v, want INVALID_INPUT 400 naming name and nodeCount, with a request ID", e)
	}
	if !strings.Contains(e.Error(), "nodeCount") || !strings.Contains(e.Error(), e.RequestID) {
		t.Errorf("Error() = %q, want the fields and the request ID", e.Error())
	}

	_, err = c.GetCluster(ctx, "acme", "kcl_01jd8x4k2m9q7v3w5y6z0a1b2c")
	if !client.IsCode(err, client.CodeNotFound) || !errors.As(err, &e) || e.StatusCode != 404 {
		t.Errorf("GetCluster of nothing = %v, want NOT_FOUND 404", err)
	}

	anon, err := client.New(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anon.GetCluster(ctx, "acme", "kcl_01jd8x4k2m9q7v3w5y6z0a1b2c"); !client.IsCode(err, client.CodeUnauthenticated) {
		t.Errorf("GetCluster without a token = %v, want UNAUTHENTICATED", err)
	}
}

// TestClientWaitEndsOnError creates a node pool the provider refuses and checks
// that the wait for ready ends with a *client.FailedError carrying the
// provider's message.
func TestClientWaitEndsOnError(t *testing.T) {
	t.Parallel()
	s := devStack(t)
	c, _ := newClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), waitTime)
	defer cancel()
	cl, err := c.CreateCluster(ctx, client.CreateClusterRequest{TenantID: "acme", PoolID: "pool-dev", Name: clusterName("refused"),
		Mode: client.ModeStandard, Region: "us-central1", NodePools: []client.NodePoolSpec{{Name: "default", MachineType: "e2-standard-4", NodeCount: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitCluster(ctx, "acme", cl.ID, client.StateReady, fastWait(nil)); err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateNodePool(ctx, client.CreateNodePoolRequest{TenantID: "acme", ClusterID: cl.ID,
		NodePoolSpec: client.NodePoolSpec{Name: "bad", MachineType: "e2-nonexistent", NodeCount: 1}})
	if err != nil {
		t.Fatalf("CreateNodePool: %v", err)
	}
	p, err = c.WaitNodePool(ctx, "acme", cl.ID, p.ID, client.StateReady, fastWait(nil))
	var fe *client.FailedError
	if !errors.As(err, &fe) || p == nil || p.State != client.StateError {
		t.Fatalf("WaitNodePool of a refused pool = %v, %v; want a *FailedError and the pool in error", p, err)
	}
	if fe.Message == "" || fe.Message != p.Message || !strings.Contains(fe.Message, "e2-nonexistent") {
		t.Errorf("FailedError message = %q, pool message %q; want the provider's, naming the machine type", fe.Message, p.Message)
	}
	if _, err := c.WaitCluster(ctx, "acme", cl.ID, client.StateReady, fastWait(nil)); !errors.As(err, &fe) || !strings.Contains(fe.Message, "bad") {
		t.Errorf("WaitCluster with a failed pool = %v, want a *FailedError naming the pool", err)
	}
}

// TestClientRetryKeepsTheIdempotencyKey loses the answer of a create once (the
// server made the pool, the client saw a 503) and checks the retry sends
// the same key and request ID and gets the same pool, and that one pool
// exists.
func TestClientRetryKeepsTheIdempotencyKey(t *testing.T) {
	t.Parallel()
	s := devStack(t)
	c, _ := newClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), waitTime)
	defer cancel()
	cl, err := c.CreateCluster(ctx, client.CreateClusterRequest{TenantID: "acme", PoolID: "pool-dev", Name: clusterName("retry"),
		Mode: client.ModeStandard, Region: "us-central1", NodePools: []client.NodePoolSpec{{Name: "default", MachineType: "e2-standard-4", NodeCount: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	lossy := &losingTransport{lose: 1}
	tok, _ := client.DevToken(ctx, s.URL, "alice")
	lc, err := client.New(s.URL, client.WithToken(tok), client.WithHTTPClient(&http.Client{Transport: lossy}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := lc.CreateNodePool(ctx, client.CreateNodePoolRequest{TenantID: "acme", ClusterID: cl.ID,
		NodePoolSpec: client.NodePoolSpec{Name: "twice", MachineType: "e2-standard-4", NodeCount: 1}})
	if err != nil {
		t.Fatalf("CreateNodePool through a lost answer: %v", err)
	}
	if len(lossy.keys) != 2 || lossy.keys[0] != lossy.keys[1] || lossy.keys[0] == "" || lossy.ids[0] != lossy.ids[1] {
		t.Errorf("attempts sent keys %q and request IDs %q, want two attempts with the same key and ID", lossy.keys, lossy.ids)
	}
	pools, err := c.ListNodePools(ctx, "acme", cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, x := range pools {
		if x.Name == "twice" {
			n++
			if x.ID != p.ID {
				t.Errorf("the retry answered pool %s, the list has %s", p.ID, x.ID)
			}
		}
	}
	if n != 1 {
		t.Errorf("pools named twice = %d, want 1", n)
	}
}

// losingTransport passes every request to the server, but answers the
// first lose of them 503 UNAVAILABLE (Retry-After: 0) whatever the server
// said, as a proxy that lost the answer would.
type losingTransport struct {
	mu   sync.Mutex
	lose int
	keys []string
	ids  []string
}

func (l *losingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	var b struct{ IdempotencyKey string }
	_ = json.Unmarshal(body, &b)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, b.IdempotencyKey)
	l.ids = append(l.ids, req.Header.Get(client.RequestIDHeader))
	if l.lose > 0 {
		l.lose--
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		h := http.Header{"Retry-After": {"0"}, "Content-Type": {"application/json"}}
		return &http.Response{StatusCode: 503, Status: "503 Service Unavailable", Header: h, Request: req,
			Body: io.NopCloser(strings.NewReader(`{"error":{"code":"UNAVAILABLE","message":"lost"}}`))}, nil
	}
	return resp, nil
}

// TestClientSubstrates reads a pool's substrate through the client: the pools
// module's event makes it, get, list and listNodes read it (every answer
// checked against the document), and archiving the pool tears it down.
func TestClientSubstrates(t *testing.T) {
	t.Parallel()
	s := devStack(t)
	c, _ := newClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), waitTime)
	defer cancel()

	poolID := clusterName("pool-client")
	publishPool(t, devstack.PoolsPutPath, map[string]any{"id": poolID, "tenantId": "acme", "version": 1,
		"policy": map[string]any{"substrate": map[string]any{"kind": "kubernetes", "account": "acc-gcp",
			"cluster": map[string]any{"create": map[string]any{"region": "us-central1"}}}},
		"flavors": []any{map[string]any{"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 1}}})

	// The plan of the next version: its one flavor resized in place.
	plan, err := c.PlanSubstrate(ctx, "acme", json.RawMessage(`{"id":"`+poolID+`","tenantId":"acme","version":2,`+
		`"policy":{"substrate":{"kind":"kubernetes","account":"acc-gcp","cluster":{"create":{"region":"us-central1"}}}},`+
		`"flavors":[{"name":"cpu","machineType":"e2-standard-4","nodeCount":1}]}`))
	if err != nil || len(plan.Actions) == 0 || plan.Substrate == nil || plan.Substrate.PoolID != poolID {
		t.Errorf("PlanSubstrate = %+v, %v; want the pool's substrate and its actions", plan, err)
	}
	if _, err := c.PlanSubstrate(ctx, "acme", json.RawMessage(`{"id":"`+poolID+`","tenantId":"acme","version":0}`)); !errors.As(err, new(*client.Error)) ||
		!client.IsCode(err, client.CodeInvalidInput) {
		t.Errorf("PlanSubstrate of a malformed pool = %v, want INVALID_INPUT", err)
	}

	var sub client.Substrate
	wait.For(t, "the substrate of pool "+poolID, func() (bool, string) {
		list, err := c.ListSubstrates(ctx, "acme", poolID)
		if err != nil {
			t.Fatalf("ListSubstrates: %v", err)
		}
		if len(list) > 1 {
			t.Fatalf("ListSubstrates of one pool = %d substrates, want at most 1", len(list))
		}
		if len(list) == 1 {
			sub = list[0]
		}
		return len(list) == 1, "no substrate listed"
	})
	if sub.PoolID != poolID || sub.TenantID != "acme" || sub.Mode != client.SubstrateCreate || sub.AccountID != "acc-gcp" || sub.PoolVersion != 1 {
		t.Errorf("substrate = %+v, want pool %s's, create mode, on acc-gcp, version 1", sub, poolID)
	}

	got, err := c.GetSubstrate(ctx, "acme", sub.ID)
	if err != nil || got.ID != sub.ID || got.PoolID != poolID {
		t.Errorf("GetSubstrate = %+v, %v; want %s", got, err, sub.ID)
	}
	all, err := c.ListSubstrates(ctx, "acme", "")
	if err != nil || !slicesContainID(all, sub.ID) {
		t.Errorf("ListSubstrates of the tenant = %d substrates, %v; want %s among them", len(all), err, sub.ID)
	}
	page, err := c.ListSubstrateNodes(ctx, client.ListSubstrateNodesRequest{TenantID: "acme", SubstrateID: sub.ID, PageSize: 1})
	if err != nil || page.Nodes == nil || len(page.Nodes) != 0 || page.NextPageToken != "" {
		t.Errorf("ListSubstrateNodes = %+v, %v; want no node joined (the devstack runs no Kubernetes here) and no next page", page, err)
	}
	for n, err := range c.AllSubstrateNodes(ctx, "acme", sub.ID) {
		t.Errorf("AllSubstrateNodes yields %+v, %v; want nothing", n, err)
	}
	if _, err := c.ListSubstrateNodes(ctx, client.ListSubstrateNodesRequest{TenantID: "acme", SubstrateID: sub.ID, PageToken: "forged"}); !client.IsCode(err, client.CodeInvalidInput) {
		t.Errorf("ListSubstrateNodes with a forged page token = %v, want INVALID_INPUT", err)
	}
	if _, err := c.GetSubstrate(ctx, "acme", "ksb_01jd8x4k2m9q7v3w5y6z0a1b2e"); !client.IsCode(err, client.CodeNotFound) {
		t.Errorf("GetSubstrate of nothing = %v, want NOT_FOUND", err)
	}
	var e *client.Error
	if _, err := c.GetSubstrate(ctx, "acme", "kcl_01jd8x4k2m9q7v3w5y6z0a1b2e"); !errors.As(err, &e) || e.Code != client.CodeInvalidInput || len(e.Details) != 1 || e.Details[0].Field != "substrateId" {
		t.Errorf("GetSubstrate of a cluster ID = %v, want INVALID_INPUT naming substrateId", err)
	}

	// Archived, the pool's substrate is torn down and no longer listed.
	publishPool(t, devstack.PoolsArchivePath, map[string]any{"id": poolID, "tenantId": "acme", "version": 2})
	var seen []client.Observation
	gone, err := c.WaitSubstrate(ctx, "acme", sub.ID, client.StateDeleted, fastWait(&seen))
	if err != nil || gone.State != client.StateDeleted || gone.ID != sub.ID {
		t.Fatalf("WaitSubstrate deleted = %+v, %v (observed %v); want %s deleted", gone, err, seen, sub.ID)
	}
	if list, err := c.ListSubstrates(ctx, "acme", poolID); err != nil || len(list) != 0 {
		t.Errorf("ListSubstrates of an archived pool = %+v, %v; want none", list, err)
	}
}

func slicesContainID(list []client.Substrate, id string) bool {
	for _, s := range list {
		if s.ID == id {
			return true
		}
	}
	return false
}
