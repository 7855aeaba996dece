package clusters

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	"github.com/better-compute/kubernetes/shared/model"
)

// stockoutRE finds the provider's words for a zone out of the machines
// asked for: GKE's code (GCE_STOCKOUT, in its operations' errors, its
// pools' status messages and conditions) or Compute Engine's.
var stockoutRE = regexp.MustCompile(`\b(ZONE_RESOURCE_POOL_EXHAUSTED(?:_WITH_DETAILS)?|GCE_STOCKOUT)\b`)

// exhaustedRE is Compute Engine's message of a zone out of resources,
// which GKE may give without a code ("The zone 'projects/P/zones/Z' does
// not have enough resources available to fulfill the request."): the
// message of ZONE_RESOURCE_POOL_EXHAUSTED.
var exhaustedRE = regexp.MustCompile(`does not have enough resources available`)

// zoneRE finds the zones a provider's message names: zones/Z in a
// resource name, or zone "Z".
var zoneRE = regexp.MustCompile(`(?:zones/|zone ["']?)([a-z]+-[a-z]+[0-9]+-[a-z])\b`)

// stockout reports whether the provider's message says that a zone ran
// out of the pool's machines, and in which words.
func stockout(msg string) (string, bool) {
	if m := stockoutRE.FindString(msg); m != "" {
		return m, true
	}
	if exhaustedRE.MatchString(msg) {
		return "ZONE_RESOURCE_POOL_EXHAUSTED", true
	}
	return "", false
}

// withConditions is a status message with the provider's conditions of
// the same resource or operation: GKE deprecates the status messages for
// the conditions, so either may say what is wrong. A condition's code
// (GCE_STOCKOUT, GCE_QUOTA_EXCEEDED) is kept with its words when they do
// not name it, so that a stockout or a quota is read as such; a condition
// the message already says is not repeated.
func withConditions(msg string, conds []*containerpb.StatusCondition) string {
	for _, c := range conds {
		text := c.GetMessage()
		// The deprecated code, as GKE still sets it: canonicalCode cannot
		// say GCE_STOCKOUT.
		code := ""
		if c.GetCode() != containerpb.StatusCondition_UNKNOWN {
			code = c.GetCode().String()
		}
		said := text == "" || strings.Contains(msg, text)
		named := code == "" || strings.Contains(msg, code) || strings.Contains(text, code)
		switch {
		case said && named:
			continue
		case said:
			text = "[" + code + "]"
		case !named:
			text = "[" + code + "]: " + text
		}
		if msg != "" {
			msg += "; "
		}
		msg += text
	}
	return msg
}

func isStockout(msg string) bool {
	_, ok := stockout(msg)
	return ok
}

// failure is what a pool the provider shows failing says: the provider's
// message, or for a stockout, plainly, the zones, the machine type, the
// nodes got of those wanted and how often it is looked at again
// ("us-central1-a: no g2-standard-8 available
// (ZONE_RESOURCE_POOL_EXHAUSTED); 1 of 2 nodes; retried every 5
// minutes").
func (p *planner) failure(np *model.NodePool, op ObservedPool) string {
	code, ok := stockout(op.Message)
	if !ok {
		return op.Message
	}
	return stockoutMessage(code, op.Message, np.Spec.MachineType, op.Nodes, p.retryEvery)
}

// stockoutMessage words a stockout: the zones are those whose instance
// groups lack nodes, else those the provider's message names; the counts
// are left out when the nodes could not be read.
func stockoutMessage(code, provider, machineType string, nodes *PoolNodes, every time.Duration) string {
	var zones []string
	if nodes != nil {
		zones = nodes.Short
	}
	if len(zones) == 0 {
		for _, m := range zoneRE.FindAllStringSubmatch(provider, -1) {
			if !slices.Contains(zones, m[1]) {
				zones = append(zones, m[1])
			}
		}
		slices.Sort(zones)
	}
	var b strings.Builder
	if len(zones) > 0 {
		b.WriteString(strings.Join(zones, ", ") + ": ")
	}
	fmt.Fprintf(&b, "no %s available (%s)", machineType, code)
	if nodes != nil {
		fmt.Fprintf(&b, "; %d of %d nodes", nodes.Running, nodes.Target)
	}
	if every > 0 {
		b.WriteString("; retried every " + spell(every))
	}
	return b.String()
}

// spell says a duration in words: "5 minutes", "1 hour", "2 seconds",
// else Go's form ("1m30s").
func spell(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		if d%u.d != 0 || d < u.d {
			continue
		}
		n := int64(d / u.d)
		if n == 1 {
			return "1 " + u.name
		}
		return fmt.Sprintf("%d %ss", n, u.name)
	}
	return d.String()
}
