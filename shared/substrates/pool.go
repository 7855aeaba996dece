package substrates

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// What an event of the pools module asks of its pool's substrate: the
// consumer (functions/poolevents) records it, kubernetesSubstrates.plan
// previews it (Previewer). Both decode the event at the edge and hand
// over the decoded values.

// Desired is what a well-formed event ev of a pool asks of its
// substrate: ev with its substrate's node pools named (NodePoolName),
// the reason it cannot be served, if any, as its Want's Problem, and its
// AccountID set when the account is one the tenant may use; and that
// account (nil when there is none). ev.Want is as the event names it
// (input.PoolUpdated.Want); it is not changed.
func Desired(ctx context.Context, st *store.Store, ev store.PoolEvent) (store.PoolEvent, *store.Account, error) {
	if ev.Want == nil {
		return ev, nil, nil
	}
	s := *ev.Want
	s.Flavors = make([]lifecycle.Flavor, len(ev.Want.Flavors))
	for i, f := range ev.Want.Flavors {
		f.NodePool.Name = NodePoolName(ev.PoolID, f.Name)
		s.Flavors[i] = f
	}
	ev.Want = &s
	acc, err := st.Account(ctx, s.AccountID)
	switch {
	case err != nil:
		return ev, nil, err
	case acc == nil || !acc.UsableBy(ev.TenantID):
		// The same words for both, so that a tenant learns nothing of
		// the accounts of others.
		s.Problem = store.Unusable(s.AccountID, ev.TenantID)
		acc = nil
	case !acc.ManagedKubernetes():
		s.Problem = fmt.Sprintf("the provider %q of account %s has no managed Kubernetes", acc.Provider, acc.ID)
	default:
		if s.Mode == resource.SubstrateCreate {
			s.Problem = placement(&s, acc.Regions)
		}
		ev.AccountID = acc.ID
	}
	return ev, acc, nil
}

// placement is why the region and zones of a cluster to create, and its
// flavors' zones, are not the account's ("" when they are).
func placement(s *lifecycle.SubstrateSpec, regions map[string][]string) string {
	allowed, ok := regions[s.Region]
	if !ok {
		return fmt.Sprintf("region %s is not enabled on account %s", s.Region, s.AccountID)
	}
	if fe := lifecycle.CheckZones("policy.substrate.cluster.create.zones", s.Zones, s.Region, allowed); len(fe) > 0 {
		return fe[0].Field + " " + fe[0].Reason
	}
	zones := allowed
	if len(s.Zones) > 0 {
		zones = s.Zones
	}
	for i, f := range s.Flavors {
		if fe := lifecycle.CheckZones(fmt.Sprintf("flavors[%d].zones", i), f.NodePool.Zones, s.Region, zones); len(fe) > 0 {
			return fe[0].Field + " " + fe[0].Reason
		}
	}
	return ""
}

// Previewer answers kubernetesSubstrates.plan.
type Previewer struct {
	store *store.Store
	now   func() time.Time
}

// NewPreviewer returns the previews of pool events over the store.
func NewPreviewer(s *store.Store, opts ...Option) (*Previewer, error) {
	if s == nil {
		return nil, errors.New("substrates: NewPreviewer needs a store")
	}
	return &Previewer{store: s, now: clockOf(opts)}, nil
}

// Plan answers kubernetesSubstrates.plan: what the pool's substrate would
// do if the pool's next event were ev (a compute.pool.updated), action by
// action, and the substrate as it would be once converged (Preview),
// changing nothing. Reading it takes compute:kubernetes:read on the
// substrate's cluster, or on the tenant while it has none. The pool's
// version is not compared with the last one applied.
func (p *Previewer) Plan(ctx context.Context, c auth.Principal, ev store.PoolEvent) (resource.SubstratePlan, error) {
	g, err := p.store.Grant(ctx, c)
	if err != nil {
		return resource.SubstratePlan{}, err
	}
	subs, err := p.store.ActiveSubstrates(ctx, c.TenantID(), ev.PoolID)
	if err != nil {
		return resource.SubstratePlan{}, err
	}
	var cur *lifecycle.Substrate
	for i := range subs {
		if !subs[i].Spec.Deleting {
			cur = &subs[i]
		}
	}
	clusterID := ""
	if cur != nil {
		clusterID = cur.ClusterID()
	}
	if err := auth.Authorize(c, g, auth.PermRead, auth.Resource{ClusterID: clusterID}); err != nil {
		return resource.SubstratePlan{}, err
	}
	ev, acc, err := Desired(ctx, p.store, ev)
	if err != nil {
		return resource.SubstratePlan{}, err
	}
	want := ev.Want
	if want != nil {
		owner, err := p.store.PoolOwner(ctx, ev.PoolID)
		if err != nil {
			return resource.SubstratePlan{}, err
		}
		if owner != "" && owner != c.TenantID() {
			w := *want
			w.Problem = lifecycle.ForeignPool(ev.PoolID)
			want = &w
		}
	}
	now := p.now().UTC()
	var in Input
	var curSpec *lifecycle.SubstrateSpec
	if cur != nil {
		rd, err := p.store.ReadSubstrate(ctx, c.TenantID(), cur.ID)
		if err != nil {
			return resource.SubstratePlan{}, err
		}
		if rd == nil {
			return resource.SubstratePlan{}, errs.E(errs.Unavailable, "substrate %s changed while it was read; retry", cur.ID)
		}
		in = Input{Substrate: rd.Substrate, PreviousGone: rd.PreviousGone, Cluster: rd.Cluster, Adopted: rd.Adopted, Pools: rd.Pools}
		curSpec = &in.Substrate.Spec
	}
	// As store.ApplyPoolEvent would record it. A new substrate is
	// previewed as though the pool's last were gone: the plan shows that
	// one's teardown first.
	change := lifecycle.ChangePool(curSpec, want, ev.Version, "", now)
	plan := resource.SubstratePlan{Actions: []resource.PlanAction{}}
	var last *lifecycle.Substrate
	if change.Next != nil {
		in.Substrate.Spec = *change.Next
		acts, s := Preview(in, nil, now)
		plan.Actions = append(plan.Actions, acts...)
		last = &s
	}
	if change.New != nil {
		spec := *change.New
		in := Input{Substrate: lifecycle.Substrate{TenantID: c.TenantID(), PoolID: ev.PoolID, CreatedAt: now, Active: true, Spec: spec,
			Status: lifecycle.SubstrateStatus{State: resource.StatePending}}}
		if spec.Mode == resource.SubstrateAdopt {
			if in.Cluster, in.Pools, err = p.store.ReadAdoption(ctx, c.TenantID(), spec.AdoptClusterID); err != nil {
				return resource.SubstratePlan{}, err
			}
		}
		zones := spec.Zones
		if len(zones) == 0 && acc != nil {
			zones = acc.Regions[spec.Region]
		}
		acts, s := Preview(in, zones, now)
		plan.Actions = append(plan.Actions, acts...)
		last = &s
	}
	if last == nil {
		plan.Actions = append(plan.Actions, resource.PlanAction{Action: resource.PlanNone, Reason: "the pool asks for no substrate, and it has none"})
		return plan, nil
	}
	v := last.View()
	plan.Substrate = &resource.PlannedSubstrate{Substrate: v, ID: v.ID}
	return plan, nil
}
