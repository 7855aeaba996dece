package clusters_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"google.golang.org/api/option"

	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/shared/clusters"
)

// fieldsRT presents an access token and records the field selection
// (X-Goog-FieldMask) of each request and its answer; with refuse, it
// answers 400 to a request with a selection, as a Compute Engine that did
// not take it would.
type fieldsRT struct {
	tok    string
	refuse bool

	mu      sync.Mutex
	masks   []string
	answers []string
}

func (f *fieldsRT) RoundTrip(r *http.Request) (*http.Response, error) {
	// The client keeps gax's header names as written (lower case), which
	// Header.Get, canonicalizing, would miss; servers read them in any
	// case.
	var mask string
	for k, v := range r.Header {
		if strings.EqualFold(k, "X-Goog-FieldMask") && len(v) > 0 {
			mask = v[0]
		}
	}
	f.mu.Lock()
	f.masks = append(f.masks, mask)
	f.mu.Unlock()
	if f.refuse && mask != "" {
		body := `{"error":{"code":400,"message":"Invalid field selection","errors":[{"message":"Invalid field selection","domain":"global","reason":"invalidParameter"}]}}`
		return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+f.tok)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	f.mu.Lock()
	f.answers = append(f.answers, string(b))
	f.mu.Unlock()
	return resp, nil
}

// The node counts ask Compute Engine only for the fields they count from,
// and the simulator answers only those; a Compute Engine that refused the
// selection gets the listing again without it, then whole listings only,
// and the counts are right either way.
func TestNodeCountsSelectTheirFields(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		late := &lateCompute{}
		e := newIAMEnv(t, clusters.WithNodeCounts(clusters.NodeCounts{Compute: late, TTL: time.Nanosecond}))
		cs, err := gkeemu.NewComputeServer(e.gke, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		rt := &fieldsRT{tok: e.iam.IssueToken(reconcilerSA, 100*time.Hour), refuse: refuse}
		c, err := compute.NewInstanceGroupManagersRESTClient(context.Background(), option.WithEndpoint(cs.URL()), option.WithHTTPClient(&http.Client{Transport: rt}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		late.c = c

		for _, name := range []string{"c-one", "c-two"} {
			cl := e.create(t, "pool", name)
			ps, err := e.st.ListNodePools(context.Background(), e.caller, cl.ID)
			if err != nil || len(ps) != 1 {
				t.Fatalf("ListNodePools = %v, %v", ps, err)
			}
			if n := ps[0].CurrentNodeCount; n == nil || *n != 1 {
				t.Errorf("refuse=%v %s: currentNodeCount = %v, want 1", refuse, name, n)
			}
		}
		rt.mu.Lock()
		masks, answers := rt.masks, rt.answers
		rt.mu.Unlock()
		if len(masks) < 2 {
			t.Fatalf("refuse=%v: %d listings, want one per cluster at least", refuse, len(masks))
		}
		want := "items/*/instanceGroupManagers(name,zone,targetSize,currentActions/none),nextPageToken"
		for i, m := range masks {
			switch {
			case !refuse && m != want:
				t.Errorf("listing %d asked for %q, want %q", i, m, want)
			case refuse && i == 0 && m != want:
				t.Errorf("first listing asked for %q, want %q", m, want)
			case refuse && i > 0 && m != "":
				t.Errorf("listing %d after a refusal asked for %q, want whole groups", i, m)
			}
		}
		for _, a := range answers {
			if refuse != strings.Contains(a, "selfLink") || !strings.Contains(a, `"targetSize"`) {
				t.Errorf("refuse=%v: answer %s: want only the selected fields when selected (no selfLink), whole groups otherwise", refuse, a)
			}
		}
	}
}
