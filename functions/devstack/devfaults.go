package devstack

import (
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/better-compute/kubernetes/emulators/faults"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
)

// FaultsPath is where the emulators' faults are injected, listed and
// cleared (API.md §8).
const FaultsPath = "/dev/faults"

// faultServices are the services of POST /dev/faults, in the order they
// are listed.
var faultServices = []string{"firestore", "pubsub", "tasks", "gke", "compute", "iam"}

// faultActions are the actions of POST /dev/faults.
var faultActions = []faults.Action{faults.Fail, faults.Lose, faults.Delay}

// faultRoutes serves the fault API: the emulators' own fault injection,
// reachable over HTTP. The emulators run in the stack's process, so a
// fault applies to the calls of every instance (-instances N) alike.
func (s *Stack) faultRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+FaultsPath, s.injectFault)
	mux.HandleFunc("GET "+FaultsPath, s.listFaults)
	mux.HandleFunc("DELETE "+FaultsPath, s.clearFaults)
	mux.HandleFunc("DELETE "+FaultsPath+"/{id}", s.removeFault)
}

// injector is the fault injector of the service named name (one of
// faultServices), or nil.
func (s *Stack) injector(name string) *faults.Injector {
	switch name {
	case "firestore":
		return s.Firestore.Injector
	case "pubsub":
		return s.PubSub.Injector
	case "tasks":
		return s.Tasks.Injector
	case "gke":
		return s.GKE.Injector
	case "compute":
		return s.Compute.Injector
	case "iam":
		return s.IAM.Injector
	}
	return nil
}

// FaultRequest is the body of POST /dev/faults.
type FaultRequest struct {
	Service string   `json:"service"`
	Method  string   `json:"method"`
	Action  string   `json:"action"`
	Code    string   `json:"code,omitempty"`
	Count   *int     `json:"count,omitempty"`
	Share   *float64 `json:"share,omitempty"`
	Seed    *int64   `json:"seed,omitempty"`
	Latency string   `json:"latency,omitempty"`
}

// Fault is an active fault, as GET /dev/faults lists it: its request,
// its ID and the calls it has hit so far.
type Fault struct {
	ID string `json:"id"`
	FaultRequest
	Hits int `json:"hits"`
}

// fault checks r and returns the fault it asks for, or the broken fields.
func (s *Stack) fault(r *FaultRequest) (*faults.Injector, faults.Fault, []errs.FieldError) {
	var bad []errs.FieldError
	add := func(field, reason string) { bad = append(bad, errs.FieldError{Field: field, Reason: reason}) }
	f := faults.Fault{Method: r.Method, Action: faults.Action(r.Action)}
	in := s.injector(r.Service)
	if in == nil {
		add("service", "must be one of "+strings.Join(faultServices, ", "))
	}
	switch {
	case r.Method == "":
		add("method", "required: an RPC of the service as it names it, or *")
	case r.Method != faults.AnyMethod && in != nil && !slices.Contains(in.Methods(), r.Method):
		add("method", "the service "+r.Service+" has no method "+r.Method+"; it has "+strings.Join(in.Methods(), ", ")+", or *")
	}
	if !slices.Contains(faultActions, f.Action) {
		add("action", "must be fail, lose or latency")
	}
	if f.Action == faults.Delay {
		if r.Code != "" {
			add("code", "only for fail and lose")
		}
		d, err := time.ParseDuration(r.Latency)
		switch {
		case r.Latency == "":
			add("latency", `required for latency: a Go duration such as "50ms"`)
		case err != nil || d <= 0 || d > time.Hour:
			add("latency", `must be a Go duration from "1ns" to "1h", such as "50ms"`)
		}
		f.Latency = d
	} else {
		if r.Latency != "" {
			add("latency", "only for the action latency")
		}
		f.Code = codes.Unavailable
		if r.Code != "" {
			c, ok := faults.ParseCode(r.Code)
			if !ok || c == 0 {
				add("code", "must be a gRPC code name other than OK, such as UNAVAILABLE or DEADLINE_EXCEEDED")
			}
			f.Code = c
		}
	}
	if r.Count != nil {
		if *r.Count < 1 {
			add("count", "must be 1 or more")
		}
		f.Count = *r.Count
	}
	if r.Share != nil {
		if math.IsNaN(*r.Share) || *r.Share <= 0 || *r.Share > 1 {
			add("share", "must be above 0 and at most 1")
		}
		f.Share = *r.Share
	}
	if r.Seed != nil {
		seed := uint64(*r.Seed)
		f.Seed = &seed
	}
	return in, f, bad
}

// injectFault answers POST /dev/faults: 200 {"id"}.
func (s *Stack) injectFault(w http.ResponseWriter, r *http.Request) {
	var in *faults.Injector
	var f faults.Fault
	req, ok := readRequest(w, r, func(req *FaultRequest) []errs.FieldError {
		var bad []errs.FieldError
		in, f, bad = s.fault(req)
		return bad
	})
	if !ok {
		return
	}
	id, err := in.Inject(f)
	if err != nil {
		httpapi.WriteError(r.Context(), w, errs.Wrap(errs.Invalid, err, "the fault cannot be injected: %v", err))
		return
	}
	id = req.Service + "-" + id
	s.log.Info("Injected a fault", "id", id, "service", req.Service, "method", req.Method, "action", req.Action)
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"id": id})
}

// Faults is the active faults of every emulator, by service and then in
// the order they were injected.
func (s *Stack) Faults() []Fault {
	out := []Fault{}
	for _, svc := range faultServices {
		for _, f := range s.injector(svc).Faults() {
			l := Fault{ID: svc + "-" + f.ID, Hits: f.Hits, FaultRequest: FaultRequest{
				Service: svc, Method: f.Method, Action: string(f.Action),
			}}
			if f.Action == faults.Delay {
				l.Latency = f.Latency.String()
			} else {
				l.Code = faults.CodeName(f.Code)
			}
			if f.Count > 0 {
				l.Count = &f.Count
			}
			if f.Share > 0 {
				l.Share = &f.Share
			}
			if f.Seed != nil {
				seed := int64(*f.Seed)
				l.Seed = &seed
			}
			out = append(out, l)
		}
	}
	return out
}

// listFaults answers GET /dev/faults: {"faults": [...]}.
func (s *Stack) listFaults(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	httpapi.WriteJSON(w, http.StatusOK, map[string][]Fault{"faults": s.Faults()})
}

// ClearFaults removes every fault injected through the fault API, and
// says how many.
func (s *Stack) ClearFaults() int {
	n := 0
	for _, svc := range faultServices {
		in := s.injector(svc)
		for _, f := range in.Faults() {
			if in.Remove(f.ID) {
				n++
			}
		}
	}
	return n
}

// clearFaults answers DELETE /dev/faults: 200 {"cleared": n}.
func (s *Stack) clearFaults(w http.ResponseWriter, r *http.Request) {
	n := s.ClearFaults()
	s.log.Info("Cleared the faults", "cleared", n)
	httpapi.WriteJSON(w, http.StatusOK, map[string]int{"cleared": n})
}

// removeFault answers DELETE /dev/faults/{id}: 200 {} or 404.
func (s *Stack) removeFault(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	svc, n, ok := strings.Cut(id, "-")
	if in := s.injector(svc); !ok || in == nil || !in.Remove(n) {
		httpapi.WriteError(r.Context(), w, errs.E(errs.NotFound, "no active fault %s", id))
		return
	}
	s.log.Info("Removed a fault", "id", id)
	httpapi.WriteJSON(w, http.StatusOK, struct{}{})
}
