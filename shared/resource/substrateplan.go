package resource

// SubstratePlan is the answer of kubernetesSubstrates.plan (API.md §9):
// what the pool's substrate would do for it, in order, and the substrate
// as it would be once converged.
type SubstratePlan struct {
	// Substrate is absent when the pool asks for none and has none.
	Substrate *PlannedSubstrate `json:"substrate,omitempty"`
	Actions   []PlanAction      `json:"actions"`
}

// PlannedSubstrate is a substrate as a plan says it would be: with no id
// while none exists.
type PlannedSubstrate struct {
	Substrate
	ID string `json:"id,omitempty"`
}

// PlanAction is one action of a plan: Action is one of the PlanAction
// kinds; From and To hold the fields of the node pool that change.
type PlanAction struct {
	Action   string         `json:"action"`
	NodePool string         `json:"nodePool,omitempty"`
	Flavor   string         `json:"flavor,omitempty"`
	From     map[string]any `json:"from,omitempty"`
	To       map[string]any `json:"to,omitempty"`
	Reason   string         `json:"reason"`
}

// The kinds of a plan's actions.
const (
	PlanCreateCluster   = "createCluster"
	PlanAdoptCluster    = "adoptCluster"
	PlanCreateNodePool  = "createNodePool"
	PlanResizeNodePool  = "resizeNodePool"
	PlanReplaceNodePool = "replaceNodePool"
	PlanDeleteNodePool  = "deleteNodePool"
	PlanApplyObjects    = "applyObjects"
	PlanTeardown        = "teardown"
	PlanNone            = "none"
)

// PlanActions are the kinds of a plan's actions, in the order API.md §9
// names them.
var PlanActions = []string{PlanCreateCluster, PlanAdoptCluster, PlanCreateNodePool, PlanResizeNodePool,
	PlanReplaceNodePool, PlanDeleteNodePool, PlanApplyObjects, PlanTeardown, PlanNone}
