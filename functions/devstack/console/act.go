package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
)

// actView is the page of forms that act on the world.
type actView struct {
	Tenant, Cluster, As string
	Zone                string
	PoolJSON            string
	Plan                string
	PlanError           string
	// Faults are the emulators' active faults, and FaultServices the
	// services a new one may name.
	Faults        []Fault
	FaultServices []string
}

// faultServices are the services of POST /dev/faults.
var faultServices = []string{"firestore", "pubsub", "tasks", "gke", "compute", "iam"}

// withFaults is v with the active faults.
func (c *Console) withFaults(v actView) actView {
	if c.opt.Faults != nil {
		v.Faults = c.opt.Faults()
	}
	v.FaultServices = faultServices
	return v
}

// defaultPoolJSON is a new pool whose substrate would create a cluster.
const defaultPoolJSON = `{
  "id": "acme-gpu",
  "tenantId": "acme",
  "version": 1,
  "policy": {"substrate": {"kind": "kubernetes", "account": "acc-gcp",
    "cluster": {"create": {"region": "us-central1", "zones": ["us-central1-a", "us-central1-b"]}}}},
  "flavors": [{"name": "cpu", "machineType": "e2-standard-4", "nodeCount": 2}]
}`

func (c *Console) actPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := actView{Tenant: cmpOr(q.Get("tenant"), "acme"), Cluster: q.Get("cluster"), As: "alice", Zone: "us-central1-a", PoolJSON: defaultPoolJSON}
	c.render(w, "act", page{Title: "Act on the world", Nav: "act", Flash: q.Get("flash"), Body: c.withFaults(v)})
}

// call serves a request of the devstack's own endpoints in process; the
// answer's status and body.
func (c *Console) call(r *http.Request, path string, body any, token string) (int, string) {
	return c.callAs(r, http.MethodPost, path, body, token)
}

// callAs is call with the request's method: a DELETE sends no body.
func (c *Console) callAs(r *http.Request, method, path string, body any, token string) (int, string) {
	if c.opt.Devstack == nil {
		return http.StatusServiceUnavailable, "the devstack's endpoints are not available"
	}
	b, _ := json.Marshal(body)
	if raw, ok := body.(json.RawMessage); ok {
		b = raw
	}
	if method == http.MethodDelete {
		b = nil
	}
	req := httptest.NewRequestWithContext(r.Context(), method, path, bytes.NewReader(b))
	if method != http.MethodDelete {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	c.opt.Devstack.ServeHTTP(rec, req)
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

// act answers the forms: it calls the devstack's endpoint and goes back
// to where the form was, saying what happened.
func (c *Console) act(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := c.checkForm(r); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	f := r.PostForm
	var path string
	var body any
	method := http.MethodPost
	switch r.PathValue("what") {
	case "fault":
		path, body = faultsPath, faultRequest(f)
	case "fault-clear":
		method, path = http.MethodDelete, faultsPath+"/"+url.PathEscape(f.Get("id"))
	case "faults-clear":
		method, path = http.MethodDelete, faultsPath
	case "stockout":
		n, _ := strconv.Atoi(f.Get("count"))
		path, body = "/dev/gke/stockout", map[string]any{"zone": f.Get("zone"), "count": n}
	case "upgrade":
		b := map[string]any{"clusterId": f.Get("clusterId")}
		if d := f.Get("duration"); d != "" {
			b["duration"] = d
		}
		path, body = "/dev/gke/upgrade", b
	case "autoscale":
		n, err := strconv.Atoi(f.Get("nodeCount"))
		if err != nil {
			n = -1
		}
		path, body = "/dev/gke/autoscale", map[string]any{"clusterId": f.Get("clusterId"), "nodePool": f.Get("nodePool"), "nodeCount": n}
	case "pool":
		c.poolEvent(w, r)
		return
	default:
		http.NotFound(w, r)
		return
	}
	code, answer := c.callAs(r, method, path, body, "")
	msg := fmt.Sprintf("%s %s: %d %s", method, path, code, answer)
	back := f.Get("back")
	if back == "" || !strings.HasPrefix(back, Path) {
		back = Path + "/act"
	}
	u, err := url.Parse(back)
	if err != nil {
		u = &url.URL{Path: Path + "/act"}
	}
	q := u.Query()
	q.Set("flash", msg)
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// poolEvent shows the substrate's plan of a pool change (action plan), or
// sends it as the pools module's event (put or archive).
func (c *Console) poolEvent(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	v := actView{Tenant: f.Get("tenantId"), As: cmpOr(f.Get("as"), "alice"), Zone: "us-central1-a", PoolJSON: f.Get("pool")}
	raw := json.RawMessage(v.PoolJSON)
	if !json.Valid(raw) {
		v.PlanError = "the pool is not JSON"
		c.render(w, "act", page{Title: "Act on the world", Nav: "act", Body: c.withFaults(v)})
		return
	}
	switch f.Get("action") {
	case "put", "archive":
		path := "/dev/pools/" + f.Get("action")
		code, answer := c.call(r, path, raw, "")
		http.Redirect(w, r, Path+"/act?flash="+url.QueryEscape(fmt.Sprintf("POST %s: %d %s", path, code, answer)), http.StatusSeeOther)
		return
	}
	if c.opt.Token == nil {
		v.PlanError = "no token issuer"
	} else if tok, err := c.opt.Token(v.As); err != nil {
		v.PlanError = err.Error()
	} else {
		code, answer := c.call(r, "/api/compute/kubernetesSubstrates/plan", map[string]any{"tenantId": v.Tenant, "pool": raw}, tok)
		var pretty bytes.Buffer
		if json.Indent(&pretty, []byte(answer), "", "  ") == nil {
			answer = pretty.String()
		}
		if code != http.StatusOK {
			v.PlanError = fmt.Sprintf("%d %s", code, answer)
		} else {
			v.Plan = answer
		}
	}
	c.render(w, "act", page{Title: "Act on the world", Nav: "act", Body: c.withFaults(v)})
}

// faultsPath is the devstack's fault API (API.md §8).
const faultsPath = "/dev/faults"

// faultRequest is the body of POST /dev/faults from the fault form: the
// fields filled, numbers as numbers (a field that is not one is sent as
// it is, for the API to name).
func faultRequest(f url.Values) map[string]any {
	b := map[string]any{}
	for _, k := range []string{"service", "method", "action", "code", "latency"} {
		if v := strings.TrimSpace(f.Get(k)); v != "" {
			b[k] = v
		}
	}
	if b["action"] == "latency" {
		delete(b, "code") // the form's default code is for fail and lose
	}
	for _, k := range []string{"count", "share", "seed"} {
		v := strings.TrimSpace(f.Get(k))
		if v == "" {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && k != "share" {
			b[k] = n
		} else if x, err := strconv.ParseFloat(v, 64); err == nil && k == "share" {
			b[k] = x
		} else {
			b[k] = v
		}
	}
	return b
}
