package devstack

import (
	"errors"
	"net/http"
	"time"

	"google.golang.org/grpc/status"

	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
)

// Provider event paths of the devstack (API.md §8).
const (
	GKEUpgradePath   = "/dev/gke/upgrade"
	GKEStockoutPath  = "/dev/gke/stockout"
	GKEAutoscalePath = "/dev/gke/autoscale"
)

// gkeRoutes serves the provider events: what GKE does on its own, caused
// from outside for demos and tests.
func (s *Stack) gkeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+GKEUpgradePath, s.gkeUpgrade)
	mux.HandleFunc("POST "+GKEStockoutPath, s.gkeStockout)
	mux.HandleFunc("POST "+GKEAutoscalePath, s.gkeAutoscale)
}

// grpcMessage is the provider's own words in err, when it has them.
func grpcMessage(err error) string {
	var st interface{ GRPCStatus() *status.Status }
	if errors.As(err, &st) {
		return st.GRPCStatus().Message()
	}
	return err.Error()
}

// readRequest reads and decodes the body of a provider event into T and
// checks it with check, which names every broken field; false when the
// request was answered with the error (API.md §1-2).
func readRequest[T any](w http.ResponseWriter, r *http.Request, check func(*T) []errs.FieldError) (*T, bool) {
	ctx := r.Context()
	body, ok := httpapi.ReadBody(ctx, w, r)
	if !ok {
		return nil, false
	}
	req := new(T)
	if err := httpapi.DecodeJSON(body, req); err != nil {
		httpapi.WriteError(ctx, w, err)
		return nil, false
	}
	if bad := check(req); len(bad) > 0 {
		httpapi.WriteError(ctx, w, errs.InvalidFields(bad))
		return nil, false
	}
	return req, true
}

// required is the broken field of a required member left empty.
func required(field, v string) []errs.FieldError {
	if v == "" {
		return []errs.FieldError{{Field: field, Reason: "required"}}
	}
	return nil
}

// stockoutRequest is the body of POST /dev/gke/stockout.
type stockoutRequest struct {
	Zone  string `json:"zone"`
	Count *int   `json:"count"`
	// Form is how GKE reports it: "instances" (the default), "capacity"
	// or "conditions" (stockoutForms).
	Form string `json:"form"`
}

// stockoutForms are the forms of POST /dev/gke/stockout, as GKE reports a
// stockout (gkeemu.StockoutForm says each).
var stockoutForms = map[string]gkeemu.StockoutForm{
	"":           gkeemu.StockoutInstances,
	"instances":  gkeemu.StockoutInstances,
	"capacity":   gkeemu.StockoutCapacity,
	"conditions": gkeemu.StockoutConditions,
}

// gkeStockout answers POST /dev/gke/stockout {"zone", "count", "form"}
// (zone one of the simulator's, count from 1 to 1000):
// the next count tries to get new nodes in zone (an operation, then each
// retry of the zone's instance group, one every operation time) get fewer
// than asked (GCE_STOCKOUT, in GKE's form named); the missing nodes stay
// creating and come at the first try after those (gke.Server.StockoutAs).
// 202 {}.
func (s *Stack) gkeStockout(w http.ResponseWriter, r *http.Request) {
	req, ok := readRequest(w, r, func(req *stockoutRequest) []errs.FieldError {
		bad := required("zone", req.Zone)
		if req.Zone != "" && !gkeemu.KnownZone(req.Zone) {
			bad = append(bad, errs.FieldError{Field: "zone", Reason: "no such zone at the GKE simulator, such as us-central1-a"})
		}
		if req.Count == nil || *req.Count < 1 || *req.Count > 1000 {
			bad = append(bad, errs.FieldError{Field: "count", Reason: "must be from 1 to 1000"})
		}
		if _, ok := stockoutForms[req.Form]; !ok {
			bad = append(bad, errs.FieldError{Field: "form", Reason: "must be instances, capacity or conditions"})
		}
		return bad
	})
	if !ok {
		return
	}
	s.GKE.StockoutAs(req.Zone, *req.Count, stockoutForms[req.Form])
	httpapi.WriteJSON(w, http.StatusAccepted, struct{}{})
}

// autoscaleRequest is the body of POST /dev/gke/autoscale.
type autoscaleRequest struct {
	ClusterID string `json:"clusterId"`
	NodePool  string `json:"nodePool"`
	NodeCount *int32 `json:"nodeCount"`
}

// gkeAutoscale answers POST /dev/gke/autoscale {"clusterId", "nodePool",
// "nodeCount"}: the provider's autoscaler sets the autoscaled pool named
// nodePool to nodeCount nodes per zone, within its bounds. 202 {}.
func (s *Stack) gkeAutoscale(w http.ResponseWriter, r *http.Request) {
	req, ok := readRequest(w, r, func(req *autoscaleRequest) []errs.FieldError {
		bad := append(required("clusterId", req.ClusterID), required("nodePool", req.NodePool)...)
		if req.NodeCount == nil || *req.NodeCount < 0 {
			bad = append(bad, errs.FieldError{Field: "nodeCount", Reason: "must be 0 or more"})
		}
		return bad
	})
	if !ok {
		return
	}
	ctx := r.Context()
	cl, err := s.providerCluster(r, req.ClusterID)
	if err != nil {
		httpapi.WriteError(ctx, w, err)
		return
	}
	name := cl.name() + "/nodePools/" + req.NodePool
	if _, err := s.GKE.NodePool(name); err != nil {
		httpapi.WriteError(ctx, w, errs.E(errs.NotFound, "node pool %s of cluster %s is not at the GKE simulator", req.NodePool, req.ClusterID))
		return
	}
	if err := s.GKE.Autoscale(name, *req.NodeCount); err != nil {
		// Autoscaling off, or a count outside its bounds.
		why := err
		if inner := errors.Unwrap(err); inner != nil {
			why = inner
		}
		httpapi.WriteError(ctx, w, errs.Wrap(errs.InvalidState, err, "node pool %s cannot be autoscaled so: %s", req.NodePool, why))
		return
	}
	httpapi.WriteJSON(w, http.StatusAccepted, struct{}{})
}

// upgradeRequest is the body of POST /dev/gke/upgrade.
type upgradeRequest struct {
	ClusterID string `json:"clusterId"`
	Duration  string `json:"duration"`
}

// maxUpgradeDuration bounds an upgrade's duration: the cluster's every
// other change waits for it.
const maxUpgradeDuration = time.Hour

// gkeUpgrade answers POST /dev/gke/upgrade {"clusterId", "duration"?}:
// the GKE simulator starts its own upgrade of the cluster's control plane
// to the next version (UPGRADE_MASTER, lasting duration or the
// simulator's operation time), as a release channel does. 202
// {"operation": "operation-..."}.
func (s *Stack) gkeUpgrade(w http.ResponseWriter, r *http.Request) {
	var d time.Duration
	req, ok := readRequest(w, r, func(req *upgradeRequest) []errs.FieldError {
		bad := required("clusterId", req.ClusterID)
		if req.Duration != "" {
			var err error
			if d, err = time.ParseDuration(req.Duration); err != nil || d <= 0 || d > maxUpgradeDuration {
				bad = append(bad, errs.FieldError{Field: "duration", Reason: `must be a duration from "1ns" to "1h", such as "10s" or "1m30s"`})
			}
		}
		return bad
	})
	if !ok {
		return
	}
	ctx := r.Context()
	cl, err := s.providerCluster(r, req.ClusterID)
	if err != nil {
		httpapi.WriteError(ctx, w, err)
		return
	}
	if _, err := s.GKE.Cluster(cl.name()); err != nil {
		httpapi.WriteError(ctx, w, errs.E(errs.NotFound, "cluster %s is not at the GKE simulator yet", req.ClusterID))
		return
	}
	op, err := s.GKE.UpgradeMasterFor(cl.name(), "", d)
	if err != nil {
		// The simulator refuses an upgrade of a cluster that runs another
		// operation, as GKE would.
		httpapi.WriteError(ctx, w, errs.Wrap(errs.InvalidState, err, "cluster %s cannot be upgraded now: %s", req.ClusterID, grpcMessage(err)))
		return
	}
	httpapi.WriteJSON(w, http.StatusAccepted, map[string]string{"operation": op})
}
