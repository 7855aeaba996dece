package devstack

import (
	"errors"
	"net/http"
	"time"

	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
)

// Provider event paths of the devstack (API.md §8).
const (
	GKEUpgradePath = "/dev/gke/upgrade"
)

// gkeRoutes serves the provider events: what GKE does on its own, caused
// from outside for demos and tests.
func (s *Stack) gkeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+GKEUpgradePath, s.gkeUpgrade)
}

// upgradeRequest is the body of POST /dev/gke/upgrade.
type upgradeRequest struct {
	ClusterID string `json:"clusterId"`
	Duration  string `json:"duration"`
}

// gkeUpgrade answers POST /dev/gke/upgrade {"clusterId", "duration"?}:
// the GKE simulator starts its own upgrade of the cluster's control plane
// to the next version (UPGRADE_MASTER, lasting duration or the
// simulator's operation time), as a release channel does. 202
// {"operation": "operation-..."}.
func (s *Stack) gkeUpgrade(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, ok := httpapi.ReadBody(ctx, w, r)
	if !ok {
		return
	}
	var req upgradeRequest
	if err := httpapi.DecodeJSON(body, &req); err != nil {
		httpapi.WriteError(ctx, w, err)
		return
	}
	var bad []errs.FieldError
	if req.ClusterID == "" {
		bad = append(bad, errs.FieldError{Field: "clusterId", Reason: "required"})
	}
	var d time.Duration
	if req.Duration != "" {
		var err error
		if d, err = time.ParseDuration(req.Duration); err != nil || d <= 0 {
			bad = append(bad, errs.FieldError{Field: "duration", Reason: `must be a positive duration such as "10s" or "1m30s"`})
		}
	}
	if len(bad) > 0 {
		httpapi.WriteError(ctx, w, errs.InvalidFields(bad))
		return
	}
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
		msg := err.Error()
		var st interface{ GRPCStatus() *status.Status }
		if errors.As(err, &st) {
			msg = st.GRPCStatus().Message()
		}
		httpapi.WriteError(ctx, w, errs.Wrap(errs.InvalidState, err, "cluster %s cannot be upgraded now: %s", req.ClusterID, msg))
		return
	}
	httpapi.WriteJSON(w, http.StatusAccepted, map[string]string{"operation": op})
}
