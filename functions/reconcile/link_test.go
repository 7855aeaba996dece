package reconcile

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/tasks"
)

// The run gets the link and the hint its task carries, and no link for a
// malformed one.
func TestHandlerPassesTheLinkAndHint(t *testing.T) {
	const link = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct {
		header, value string
		got           func(chain.Kick) string
		want          string
	}{
		{tasks.LinkHeader, link, func(k chain.Kick) string { return k.Link }, link},
		{tasks.LinkHeader, "not a traceparent", func(k chain.Kick) string { return k.Link }, ""},
		{tasks.LinkHeader, "", func(k chain.Kick) string { return k.Link }, ""},
		{tasks.HintHeader, "p/us-central1/c1/", func(k chain.Kick) string { return k.Hint }, "p/us-central1/c1/"},
		{tasks.HintHeader, "", func(k chain.Kick) string { return k.Hint }, ""},
	} {
		r := &fakeRunner{}
		h, err := Handler(fakeAuth{}, r)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("POST", "/", strings.NewReader(`{"kind":"clusters","tenantId":"acme","id":"kcl_1","token":"tok"}`))
		req.Header.Set("Authorization", "Bearer good")
		if tc.value != "" {
			req.Header.Set(tc.header, tc.value)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		if len(r.kicks) != 1 || tc.got(r.kicks[0]) != tc.want {
			t.Errorf("%s %q: kicks %+v, want one carrying %q", tc.header, tc.value, r.kicks, tc.want)
		}
	}
}
