package devstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/kubernetes/functions/devstack"
)

// faultsCall makes a request of the fault API at url: its status and body.
func faultsCall(t testing.TB, method, url string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// inject posts f to the fault API and returns its ID.
func inject(t testing.TB, e *env, f map[string]any) string {
	t.Helper()
	code, body := faultsCall(t, http.MethodPost, e.URL+devstack.FaultsPath, f)
	var out struct{ ID string }
	if err := json.Unmarshal(body, &out); code != http.StatusOK || err != nil || out.ID == "" {
		t.Fatalf("POST %s %v = %d %s, want 200 {\"id\"}", devstack.FaultsPath, f, code, body)
	}
	return out.ID
}

// listFaults is GET /dev/faults, by ID.
func listFaults(t testing.TB, e *env) map[string]devstack.Fault {
	t.Helper()
	code, body := faultsCall(t, http.MethodGet, e.URL+devstack.FaultsPath, nil)
	var out struct{ Faults []devstack.Fault }
	if err := json.Unmarshal(body, &out); code != http.StatusOK || err != nil {
		t.Fatalf("GET %s = %d %s", devstack.FaultsPath, code, body)
	}
	byID := map[string]devstack.Fault{}
	for _, f := range out.Faults {
		byID[f.ID] = f
	}
	return byID
}

// TestFaultsAPIValidation: what POST /dev/faults refuses, with 400 naming
// the field, or 415 without a JSON Content-Type; DELETE of an unknown ID
// is 404.
func TestFaultsAPIValidation(t *testing.T) {
	t.Parallel()
	e := startEnv(t, fastConfig())
	tests := []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"service": "spanner", "method": "Commit", "action": "fail"}, "service"},
		{map[string]any{"service": "firestore", "method": "Publish", "action": "fail"}, "method"},
		{map[string]any{"service": "compute", "method": "instanceGroupManagers.get", "action": "fail"}, "method"},
		{map[string]any{"service": "gke", "action": "fail"}, "method"},
		{map[string]any{"service": "gke", "method": "CreateNodePool", "action": "explode"}, "action"},
		{map[string]any{"service": "gke", "method": "CreateNodePool", "action": "fail", "code": "Unavailable"}, "code"},
		{map[string]any{"service": "gke", "method": "CreateNodePool", "action": "fail", "code": "OK"}, "code"},
		{map[string]any{"service": "gke", "method": "CreateNodePool", "action": "lose", "code": "UNAVAILABLE", "count": 0}, "count"},
		{map[string]any{"service": "gke", "method": "CreateNodePool", "action": "lose", "code": "UNAVAILABLE", "share": 1.5}, "share"},
		{map[string]any{"service": "gke", "method": "*", "action": "latency"}, "latency"},
		{map[string]any{"service": "gke", "method": "*", "action": "latency", "latency": "soon"}, "latency"},
		{map[string]any{"service": "gke", "method": "*", "action": "fail", "latency": "1s"}, "latency"},
	}
	for _, tt := range tests {
		code, body := faultsCall(t, http.MethodPost, e.URL+devstack.FaultsPath, tt.body)
		var out struct {
			Error struct {
				Code    string
				Details []struct{ Field, Reason string }
			}
		}
		_ = json.Unmarshal(body, &out)
		fields := []string{}
		for _, d := range out.Error.Details {
			fields = append(fields, d.Field)
		}
		if code != http.StatusBadRequest || out.Error.Code != "INVALID_INPUT" || !slices.Equal(fields, []string{tt.field}) {
			t.Errorf("POST %v = %d %s, want 400 naming %s alone", tt.body, code, body, tt.field)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, e.URL+devstack.FaultsPath, strings.NewReader(`{"service":"gke","method":"*","action":"fail"}`))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("POST without JSON's Content-Type = %v %v, want 415", resp.Status, err)
	}
	if code, body := faultsCall(t, http.MethodDelete, e.URL+devstack.FaultsPath+"/gke-999", nil); code != http.StatusNotFound {
		t.Errorf("DELETE of an unknown fault = %d %s, want 404", code, body)
	}
	if got := listFaults(t, e); len(got) != 0 {
		t.Errorf("faults after refusals = %v, want none", got)
	}
}

// TestFaultsThroughClients: faults of the fault API as the official
// clients see them, listed with their hits, removed one by one or all.
func TestFaultsThroughClients(t *testing.T) {
	t.Parallel()
	e := startEnv(t, fastConfig())
	ctx := context.Background()

	// A lost Commit: Firestore stored the write, its client got an error.
	lost := inject(t, e, map[string]any{"service": "firestore", "method": "Commit", "action": "lose", "code": "DEADLINE_EXCEEDED", "count": 1})
	if got := listFaults(t, e)[lost]; got.Service != "firestore" || got.Method != "Commit" || got.Action != "lose" || got.Code != "DEADLINE_EXCEEDED" || got.Count == nil || *got.Count != 1 || got.Hits != 0 {
		t.Errorf("listed %s = %+v, want the lost Commit, no hit yet", lost, got)
	}
	doc := e.FirestoreClient.Collection("faultsTest").Doc("lost")
	if _, err := doc.Set(ctx, map[string]any{"n": 1}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("Set with its answer lost = %v, want DEADLINE_EXCEEDED", err)
	}
	if snap, err := doc.Get(ctx); err != nil || snap.Data()["n"] != int64(1) {
		t.Errorf("Get after the lost Set = %v, %v; want the write stored", snap, err)
	}
	if _, ok := listFaults(t, e)[lost]; ok {
		t.Errorf("the lost Commit is still listed after its one hit")
	}

	// A lost CreateTask: the queue holds the task, and a retry of its
	// name meets it.
	tc, err := cloudtasks.NewClient(ctx, e.Tasks.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tc.Close() })
	queue := e.FunctionsConfig().TasksQueue
	task := &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: &cloudtaskspb.Task{
		Name:         queue + "/tasks/faults-lost",
		ScheduleTime: timestamppb.New(time.Now().Add(time.Hour)),
		MessageType:  &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: e.URL + "/nowhere"}},
	}}
	inject(t, e, map[string]any{"service": "tasks", "method": "CreateTask", "action": "lose", "code": "DEADLINE_EXCEEDED", "count": 1})
	if _, err := tc.CreateTask(ctx, task); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("CreateTask with its answer lost = %v, want DEADLINE_EXCEEDED", err)
	}
	if _, err := tc.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: task.Task.Name}); err != nil {
		t.Errorf("GetTask after the lost CreateTask = %v, want the task", err)
	}
	if _, err := tc.CreateTask(ctx, task); status.Code(err) != codes.AlreadyExists {
		t.Errorf("CreateTask again = %v, want ALREADY_EXISTS", err)
	}

	// A failed CreateNodePool, answered before GKE looks at it.
	parent := "projects/bc-dev/locations/us-central1/clusters/nonesuch"
	create := func() error {
		_, err := e.GKEClient.CreateNodePool(ctx, &containerpb.CreateNodePoolRequest{Parent: parent, NodePool: &containerpb.NodePool{Name: "p", InitialNodeCount: 1}})
		return err
	}
	failed := inject(t, e, map[string]any{"service": "gke", "method": "CreateNodePool", "action": "fail", "code": "RESOURCE_EXHAUSTED"})
	for range 2 {
		if err := create(); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("CreateNodePool with the fault = %v, want RESOURCE_EXHAUSTED", err)
		}
	}
	if got := listFaults(t, e)[failed]; got.Hits != 2 {
		t.Errorf("listed %s = %+v, want 2 hits", failed, got)
	}
	if code, body := faultsCall(t, http.MethodDelete, e.URL+devstack.FaultsPath+"/"+failed, nil); code != http.StatusOK {
		t.Errorf("DELETE %s = %d %s", failed, code, body)
	}
	if err := create(); status.Code(err) != codes.NotFound {
		t.Errorf("CreateNodePool once the fault is removed = %v, want GKE's NOT_FOUND", err)
	}

	// Compute Engine over REST: an UNAVAILABLE is its HTTP 503, and a
	// latency delays every call.
	cc, err := compute.NewInstanceGroupManagersRESTClient(ctx, option.WithEndpoint(e.Compute.URL()),
		option.WithHTTPClient(&http.Client{Transport: bearerRT(e.FunctionsConfig().EmulatorAccessToken)}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	inject(t, e, map[string]any{"service": "compute", "method": "AggregatedList", "action": "fail", "code": "UNAVAILABLE", "count": 1})
	slow := inject(t, e, map[string]any{"service": "compute", "method": "*", "action": "latency", "latency": "150ms"})
	start := time.Now()
	err = listAll(ctx, cc, "bc-dev")
	if ae, ok := err.(*apierror.APIError); !ok || ae.HTTPCode() != http.StatusServiceUnavailable {
		t.Errorf("AggregatedList with the fault = %v, want HTTP 503", err)
	}
	if err := listAll(ctx, cc, "bc-dev"); err != nil {
		t.Errorf("AggregatedList after the fault's one call = %v", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("two calls with a latency of 150ms took %v", took)
	}
	if got := listFaults(t, e); len(got) != 1 || got[slow].Hits != 2 || got[slow].Latency != "150ms" {
		t.Errorf("faults = %+v, want the latency alone, with 2 hits", got)
	}
	inject(t, e, map[string]any{"service": "pubsub", "method": "Publish", "action": "lose", "code": "UNAVAILABLE", "share": 0.5, "seed": 3})
	code, body := faultsCall(t, http.MethodDelete, e.URL+devstack.FaultsPath, nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"cleared":2`) {
		t.Errorf("DELETE %s = %d %s, want 200 with 2 cleared", devstack.FaultsPath, code, body)
	}
	if got := listFaults(t, e); len(got) != 0 {
		t.Errorf("faults after DELETE = %+v, want none", got)
	}
}

// TestFaultsSeedRepeats: a share with a seed hits the same calls again.
func TestFaultsSeedRepeats(t *testing.T) {
	t.Parallel()
	e := startEnv(t, fastConfig())
	token := e.FunctionsConfig().EmulatorAccessToken
	pattern := func(seed int) string {
		id := inject(t, e, map[string]any{"service": "compute", "method": "AggregatedList", "action": "fail", "code": "UNAVAILABLE", "share": 0.5, "seed": seed})
		defer faultsCall(t, http.MethodDelete, e.URL+devstack.FaultsPath+"/"+id, nil)
		var b strings.Builder
		for range 40 {
			if _, err := capturedListing(e.Compute.URL(), "bc-dev", token); err != nil {
				b.WriteByte('x')
			} else {
				b.WriteByte('.')
			}
		}
		if n := listFaults(t, e)[id].Hits; n != strings.Count(b.String(), "x") {
			t.Errorf("seed %d: %d hits listed, %d calls failed", seed, n, strings.Count(b.String(), "x"))
		}
		return b.String()
	}
	a, b, c := pattern(42), pattern(42), pattern(43)
	if a != b {
		t.Errorf("seed 42 hit %s, then %s", a, b)
	}
	if a == c {
		t.Errorf("seeds 42 and 43 hit the same calls: %s", a)
	}
	if n := strings.Count(a, "x"); n < 8 || n > 32 {
		t.Errorf("share 0.5 hit %d of 40 calls: %s", n, a)
	}
}

// TestFaultsInstances: with -instances 3 the emulators stay in the
// devstack's process, so a fault applies to the calls of every instance.
func TestFaultsInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Parallel()
	e := startEnv(t, instancesConfig(3))
	before := listInstances(t, e.URL)
	const d = 300 * time.Millisecond
	id := inject(t, e, map[string]any{"service": "firestore", "method": "*", "action": "latency", "latency": d.String()})
	for i := range 9 {
		start := time.Now()
		_, err := e.api.getCluster("kcl_00000000000000000000000000")
		if took := time.Since(start); took < d {
			t.Errorf("request %d took %v (%v), want at least the latency %v", i, took, err, d)
		}
	}
	after := listInstances(t, e.URL)
	if len(before) != 3 || len(after) != 3 {
		t.Fatalf("instances = %s then %s, want 3", describe(before), describe(after))
	}
	for i := range after {
		if after[i].PID != before[i].PID || after[i].Requests <= before[i].Requests {
			t.Errorf("instance %d served %d requests of the 9, want some: %s", i, after[i].Requests-before[i].Requests, describe(after))
		}
	}
	if got := listFaults(t, e)[id]; got.Hits < 9 {
		t.Errorf("latency hit %d calls, want at least the 9 requests'", got.Hits)
	}
}

// TestFaultsInConsole: the console's act page injects a fault, lists the
// active faults with their hits, and clears one or all, each form coming
// back with the API's answer.
func TestFaultsInConsole(t *testing.T) {
	t.Parallel()
	e := startEnv(t, fastConfig())
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tok := formToken(t, e.URL)
	form := func(what string, v url.Values) string {
		t.Helper()
		if v == nil {
			v = url.Values{}
		}
		v.Set("form-token", tok)
		resp, err := noRedirect.PostForm(e.URL+"/console/act/"+what, v)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		u, err := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusSeeOther || err != nil {
			t.Fatalf("%s: %s to %q, want 303 to the act page", what, resp.Status, resp.Header.Get("Location"))
		}
		return u.Query().Get("flash")
	}
	page := func() string {
		t.Helper()
		resp, err := http.Get(e.URL + "/console/act")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if flash := form("fault", url.Values{"service": {"compute"}, "method": {"AggregatedList"}, "action": {"fail"}, "code": {"UNAVAILABLE"}, "count": {""}, "share": {""}, "seed": {""}}); !strings.Contains(flash, "200") {
		t.Fatalf("fault form: %q, want 200", flash)
	}
	if flash := form("fault", url.Values{"service": {"gke"}, "method": {"*"}, "action": {"latency"}, "code": {"UNAVAILABLE"}, "latency": {"1ms"}, "share": {"0.5"}, "seed": {"9"}}); !strings.Contains(flash, "200") {
		t.Fatalf("latency form: %q, want 200", flash)
	}
	if flash := form("fault", url.Values{"service": {"gke"}, "method": {"Nonesuch"}, "action": {"fail"}}); !strings.Contains(flash, "refused (400)") || !strings.Contains(flash, "method the service gke has no method Nonesuch") {
		t.Errorf("fault form with an unknown method: %q, want 400 naming method", flash)
	}
	for range 2 {
		_, _ = capturedListing(e.Compute.URL(), "bc-dev", e.FunctionsConfig().EmulatorAccessToken)
	}
	p := page()
	row := regexp.MustCompile(`(?s)<tr data-fault="compute-1">.*?</tr>`).FindString(p)
	if !strings.Contains(row, "AggregatedList") || !strings.Contains(row, `<td class="num">2</td>`) || !strings.Contains(p, `data-fault="gke-1"`) {
		t.Fatalf("act page lists %q, want compute-1 with 2 hits, and gke-1:\n%s", row, p)
	}
	if flash := form("fault-clear", url.Values{"id": {"compute-1"}}); !strings.Contains(flash, "Fault compute-1 cleared. (200)") {
		t.Errorf("clear form: %q", flash)
	}
	if got := listFaults(t, e); len(got) != 1 || got["gke-1"].Share == nil || *got["gke-1"].Share != 0.5 {
		t.Errorf("faults = %+v, want gke-1 alone", got)
	}
	if flash := form("faults-clear", nil); !strings.Contains(flash, "Every fault cleared (1). (200)") {
		t.Errorf("clear-all form: %q", flash)
	}
	if p := page(); !strings.Contains(p, "No active fault") {
		t.Errorf("act page after clearing lists faults still")
	}
}
