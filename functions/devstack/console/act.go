package console

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	// Clusters, Zones and PoolNames are what the forms offer to pick
	// from: the fleet's.
	Clusters  []ClusterRow
	Zones     []string
	PoolNames []string
}

// withChoices is v with the fleet's clusters, zones and node pool names
// to pick from, once the console's listeners hold the fleet.
func (c *Console) withChoices(v actView) actView {
	zones, names := map[string]bool{}, map[string]bool{}
	for _, z := range c.opt.Zones {
		zones[z] = true
	}
	v.Zones = slices.Sorted(maps.Keys(zones))
	c.watch.start(c.bg, &c.wg)
	if !c.watch.isReady() {
		return v
	}
	f, _, _ := c.watch.fleet()
	for _, r := range f.Clusters {
		if r.State == "deleted" {
			continue
		}
		v.Clusters = append(v.Clusters, r)
		for _, z := range r.Zones {
			zones[z] = true
		}
		for _, p := range r.Pools {
			names[p.Name] = true
		}
	}
	v.Zones, v.PoolNames = slices.Sorted(maps.Keys(zones)), slices.Sorted(maps.Keys(names))
	return v
}

// plans keeps the plans shown, for the page that a plan's form redirects
// to (post-redirect-get: a reload asks for no plan again): the latest
// maxPlans.
type plans struct {
	mu    sync.Mutex
	byID  map[string]actView
	order []string
}

const maxPlans = 20

func (p *plans) put(v actView) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byID == nil {
		p.byID = map[string]actView{}
	}
	p.byID[id] = v
	p.order = append(p.order, id)
	if len(p.order) > maxPlans {
		delete(p.byID, p.order[0])
		p.order = p.order[1:]
	}
	return id
}

func (p *plans) get(id string) (actView, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.byID[id]
	return v, ok
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
	if id := q.Get("plan"); id != "" {
		if p, ok := c.plans.get(id); ok {
			v.Tenant, v.As, v.PoolJSON, v.Plan, v.PlanError = p.Tenant, p.As, p.PoolJSON, p.Plan, p.PlanError
		} else {
			v.PlanError = "that plan is no longer kept: ask for it again"
		}
	}
	flash, failed := flashed(r)
	c.render(w, "act", page{Title: "Act on the world", Nav: "act", Flash: flash, FlashErr: failed, Body: c.withChoices(c.withFaults(v))})
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
		if z := f.Get("zone"); len(c.opt.Zones) > 0 && !slices.Contains(c.opt.Zones, z) {
			c.back(w, r, fmt.Sprintf("The stockout was refused: no cluster of the devstack can be in zone %q (its accounts' zones: %s).",
				z, strings.Join(c.opt.Zones, ", ")), false)
			return
		}
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
	msg, ok := said(r.PathValue("what"), f, code, answer)
	c.back(w, r, msg, ok)
}

// back sends the browser back to where the form was (its "back", or the
// act page) with msg, red when !ok.
func (c *Console) back(w http.ResponseWriter, r *http.Request, msg string, ok bool) {
	back := r.PostForm.Get("back")
	if back == "" || !strings.HasPrefix(back, Path) {
		back = Path + "/act"
	}
	u, err := url.Parse(back)
	if err != nil {
		u = &url.URL{Path: Path + "/act"}
	}
	q := u.Query()
	q.Set("flash", msg)
	q.Del("failed")
	if !ok {
		q.Set("failed", "1")
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// said is what a form's call did, in words, with its status, and whether
// it succeeded.
func said(what string, f url.Values, code int, answer string) (string, bool) {
	ok := code >= 200 && code < 300
	if !ok {
		doing := map[string]string{"stockout": "The stockout", "upgrade": "The upgrade", "autoscale": "The autoscaler's change",
			"fault": "The fault", "fault-clear": "Clearing the fault", "faults-clear": "Clearing the faults", "put": "The pool event put",
			"archive": "The pool event archive"}[what]
		return fmt.Sprintf("%s was refused (%d): %s", cmpOr(doing, what), code, reasonOf(answer)), false
	}
	var msg string
	switch what {
	case "stockout":
		msg = fmt.Sprintf("Stockout set: the next %s operations that need new nodes in %s get fewer than they ask for.", f.Get("count"), f.Get("zone"))
	case "upgrade":
		msg = fmt.Sprintf("The provider began upgrading the control plane of cluster %s", f.Get("clusterId"))
		if d := f.Get("duration"); d != "" {
			msg += ", for " + d
		}
		msg += "."
	case "autoscale":
		msg = fmt.Sprintf("The autoscaler set node pool %s of cluster %s to %s nodes a zone.", f.Get("nodePool"), f.Get("clusterId"), f.Get("nodeCount"))
	case "fault":
		var a struct{ ID string }
		_ = json.Unmarshal([]byte(answer), &a)
		msg = fmt.Sprintf("Fault %s injected: %s calls of %s now %s.", a.ID, cmpOr(f.Get("method"), "*"), f.Get("service"), f.Get("action"))
	case "fault-clear":
		msg = fmt.Sprintf("Fault %s cleared.", f.Get("id"))
	case "faults-clear":
		var a struct{ Cleared *int }
		if json.Unmarshal([]byte(answer), &a) == nil && a.Cleared != nil {
			msg = fmt.Sprintf("Every fault cleared (%d).", *a.Cleared)
		} else {
			msg = "Every fault cleared."
		}
	case "put", "archive":
		msg = fmt.Sprintf("The pool event %s was published.", what)
	default:
		msg = "Done."
	}
	return fmt.Sprintf("%s (%d)", msg, code), true
}

// reasonOf is the message of an error answer of the devstack's
// ({"error": {"message"}}), or the answer as it is.
func reasonOf(answer string) string {
	var e struct {
		Error struct {
			Code, Message string
			Details       []struct{ Field, Reason string }
		}
	}
	if json.Unmarshal([]byte(answer), &e) == nil && e.Error.Message != "" {
		msg := e.Error.Message
		for i, d := range e.Error.Details {
			if d.Field == "" {
				continue
			}
			if i == 0 {
				msg += ": "
			} else {
				msg += "; "
			}
			msg += d.Field + " " + d.Reason
		}
		return msg
	}
	if answer == "" {
		return "no answer"
	}
	return answer
}

// poolEvent shows the substrate's plan of a pool change (action plan), or
// sends it as the pools module's event (put or archive).
func (c *Console) poolEvent(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	v := actView{Tenant: f.Get("tenantId"), As: cmpOr(f.Get("as"), "alice"), Zone: "us-central1-a", PoolJSON: f.Get("pool")}
	raw := json.RawMessage(v.PoolJSON)
	if !json.Valid(raw) {
		v.PlanError = "the pool is not JSON"
		c.showPlan(w, r, v)
		return
	}
	switch f.Get("action") {
	case "put", "archive":
		path := "/dev/pools/" + f.Get("action")
		code, answer := c.call(r, path, raw, "")
		msg, ok := said(f.Get("action"), f, code, answer)
		q := url.Values{"flash": {msg}}
		if !ok {
			q.Set("failed", "1")
		}
		http.Redirect(w, r, Path+"/act?"+q.Encode(), http.StatusSeeOther)
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
	c.showPlan(w, r, v)
}

// showPlan sends the browser to the act page with the plan v (or why
// there is none).
func (c *Console) showPlan(w http.ResponseWriter, r *http.Request, v actView) {
	http.Redirect(w, r, Path+"/act?plan="+c.plans.put(v)+"#h-plan", http.StatusSeeOther)
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
