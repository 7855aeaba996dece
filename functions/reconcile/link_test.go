package reconcile

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/tasks"
)

// The run gets the link its task carries, and none for a malformed one.
func TestHandlerPassesTheLink(t *testing.T) {
	const link = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for header, want := range map[string]string{link: link, "not a traceparent": "", "": ""} {
		r := &fakeRunner{}
		h, err := Handler(fakeAuth{}, r)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("POST", "/", strings.NewReader(`{"kind":"clusters","tenantId":"acme","id":"kcl_1","token":"tok"}`))
		req.Header.Set("Authorization", "Bearer good")
		if header != "" {
			req.Header.Set(tasks.LinkHeader, header)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		if len(r.kicks) != 1 || r.kicks[0].Link != want {
			t.Errorf("%s %q: kicks %+v, want one with link %q", tasks.LinkHeader, header, r.kicks, want)
		}
	}
}

// The run gets the hint its task carries.
func TestHandlerPassesTheHint(t *testing.T) {
	for _, hint := range []string{"p/us-central1/c1/", ""} {
		r := &fakeRunner{}
		h, err := Handler(fakeAuth{}, r)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("POST", "/", strings.NewReader(`{"kind":"clusters","tenantId":"acme","id":"kcl_1","token":"tok"}`))
		req.Header.Set("Authorization", "Bearer good")
		if hint != "" {
			req.Header.Set(tasks.HintHeader, hint)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		if len(r.kicks) != 1 || r.kicks[0].Hint != hint {
			t.Errorf("%s %q: kicks %+v, want one with that hint", tasks.HintHeader, hint, r.kicks)
		}
	}
}
