package gke

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	rpccode "google.golang.org/genproto/googleapis/rpc/code"
)

// StockoutForm is one of the forms in which GKE reports a zone out of the
// machines a node pool asks for. Each is GKE's as public traces show it
// (doc.go names them); a test chooses one per stockout (StockoutAs) so
// that a client is held to all of them.
type StockoutForm int

const (
	// StockoutInstances is GKE's most quoted form: the operation ends with
	// its instance group manager's words, naming an instance and the zone
	// ("Google Compute Engine: Not all instances running in IGM after
	// 14.691006793s. Expected 1, running 0, transitioning 1. Current
	// errors: [GCE_STOCKOUT]: Instance '...' creation failed: The zone
	// 'projects/P/zones/Z' does not have enough resources available to
	// fulfill the request.  '(resource type:compute)'."), and the pool is
	// RUNNING_WITH_ERROR with the same status message.
	StockoutInstances StockoutForm = iota
	// StockoutCapacity is the terse form a pool shows: ERROR, with "Not
	// all instances running in IGM after 35m9s. Expected 18, running 16.
	// [GCE_STOCKOUT]: 2 nodes cannot be created due to lack of capacity."
	// as its status message and the operation's error, naming no zone.
	StockoutCapacity
	// StockoutConditions is the form of the API's own fields, without the
	// deprecated status messages: the pool is RUNNING_WITH_ERROR with no
	// status message and a condition of code GCE_STOCKOUT (canonical code
	// RESOURCE_EXHAUSTED) per zone short, with Compute Engine's words
	// ("The zone 'projects/P/zones/Z' does not have enough resources
	// available to fulfill the request."); the operation's error has
	// those words and its nodepoolConditions the same conditions.
	StockoutConditions
)

// Stockout makes the next n tries to get new nodes in zone (a cluster or
// node pool create, a resize up, and the instance groups' own retries)
// get fewer than asked, reported in GKE's instance group manager's words
// (StockoutInstances): the zone gets half the nodes it lacks, the pool
// ends RUNNING_WITH_ERROR, and the operation ends with RESOURCE_EXHAUSTED.
// The zone's instance group keeps creating the missing nodes
// (ComputeServer shows them creating) and tries again every operation
// time; the first try after the n are used up gets them all, and the pool
// is RUNNING again.
func (s *Server) Stockout(zone string, n int) { s.StockoutAs(zone, n, StockoutInstances) }

// Stockouts is how many tries each zone's stockouts still hold.
func (s *Server) Stockouts() map[string]int {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]int, len(g.stockouts))
	for z, n := range g.stockouts {
		if n > 0 {
			out[z] = n
		}
	}
	return out
}

// KnownZone reports whether zone is a zone of the simulator's catalog:
// one where a node pool may have nodes, and so a stockout.
func KnownZone(zone string) bool {
	_, isZone, ok := regionOf(zone)
	return ok && isZone
}

// StockoutAs is Stockout reported in form: it applies to the zone's
// pending tries, those already pending included.
func (s *Server) StockoutAs(zone string, n int, form StockoutForm) {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stockouts[zone] += n
	g.stockoutForms[zone] = form
}

// stockoutWords is what GKE says of a stockout that left zone with got of
// the target nodes of np, after the operation's time took.
func stockoutWords(form StockoutForm, c *cluster, np *nodePool, zone string, target, got int32, took time.Duration) string {
	switch form {
	case StockoutCapacity:
		return fmt.Sprintf("Not all instances running in IGM after %v. Expected %d, running %d. [GCE_STOCKOUT]: %d nodes cannot be created due to lack of capacity.", took, target, got, target-got)
	case StockoutConditions:
		return zoneExhausted(c.key.project, zone)
	}
	// The first instance the zone could not create is named.
	names := nodeNames(c.key.cluster, np.pb.Name, c.pb.Id, np.uid, zone, int(target))
	return fmt.Sprintf("Google Compute Engine: Not all instances running in IGM after %v. Expected %d, running %d, transitioning %d. Current errors: [GCE_STOCKOUT]: Instance '%s' creation failed: The zone 'projects/%s/zones/%s' does not have enough resources available to fulfill the request.  '(resource type:compute)'.",
		took, target, got, target-got, names[got], c.key.project, zone)
}

// zoneExhausted is Compute Engine's message of a zone out of resources.
func zoneExhausted(project, zone string) string {
	return fmt.Sprintf("The zone 'projects/%s/zones/%s' does not have enough resources available to fulfill the request.", project, zone)
}

// stockoutConditions are the conditions GKE shows for the zones a
// shortfall of the StockoutConditions form lacks nodes in, in zone order;
// none for the other forms, which say it in their status messages.
func stockoutConditions(project string, sh *shortfall) []*containerpb.StatusCondition {
	if sh == nil || sh.form != StockoutConditions {
		return nil
	}
	var out []*containerpb.StatusCondition
	for _, z := range slices.Sorted(maps.Keys(sh.want)) {
		out = append(out, &containerpb.StatusCondition{
			Code:          containerpb.StatusCondition_GCE_STOCKOUT,
			CanonicalCode: rpccode.Code_RESOURCE_EXHAUSTED,
			Message:       zoneExhausted(project, z),
		})
	}
	return out
}
