package substrates

import (
	"context"
	"errors"
	"time"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// What an event of the pools module asks of its pool's substrate: the
// consumer (functions/poolevents) records it, kubernetesSubstrates.plan
// previews it (Previewer). Both decode the event at the edge and name its
// flavors' node pools (Named); the rules of what it asks are lifecycle's
// (lifecycle.PoolWant, lifecycle.DecidePoolEvent).

// Named is ev with its substrate's node pools named after its pool and
// flavors (NodePoolName). ev.Want is as the event names it
// (input.PoolUpdated.Want); it is not changed.
func Named(ev model.PoolEvent) model.PoolEvent {
	if ev.Want == nil {
		return ev
	}
	s := *ev.Want
	s.Flavors = make([]model.Flavor, len(ev.Want.Flavors))
	for i, f := range ev.Want.Flavors {
		f.NodePool.Name = NodePoolName(ev.PoolID, f.Name)
		s.Flavors[i] = f
	}
	ev.Want = &s
	return ev
}

// PreviewStore is what a preview reads of the store, outside any
// transaction: the caller's grant, the pool's substrates, its account and
// owner, and what a substrate's run would read.
type PreviewStore interface {
	Grant(ctx context.Context, p auth.Principal) (auth.Grant, error)
	ActiveSubstrates(ctx context.Context, tenantID, poolID string) ([]model.Substrate, error)
	Account(ctx context.Context, id string) (*model.Account, error)
	PoolOwner(ctx context.Context, poolID string) (string, error)
	ReadSubstrate(ctx context.Context, tenantID, id string) (*store.SubstrateRead, error)
	ReadAdoption(ctx context.Context, tenantID, clusterID string) (*model.Cluster, []model.NodePool, error)
}

// Previewer answers kubernetesSubstrates.plan.
type Previewer struct {
	store PreviewStore
	now   func() time.Time
}

// NewPreviewer returns the previews of pool events over the store.
func NewPreviewer(s PreviewStore, opts ...Option) (*Previewer, error) {
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
func (p *Previewer) Plan(ctx context.Context, c auth.Principal, ev model.PoolEvent) (resource.SubstratePlan, error) {
	g, err := p.store.Grant(ctx, c)
	if err != nil {
		return resource.SubstratePlan{}, err
	}
	subs, err := p.store.ActiveSubstrates(ctx, c.TenantID(), ev.PoolID)
	if err != nil {
		return resource.SubstratePlan{}, err
	}
	var cur *model.Substrate
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
	ev = Named(ev)
	var acc *model.Account
	var owner model.Pool
	if ev.Want != nil {
		if acc, err = p.store.Account(ctx, ev.Want.AccountID); err != nil {
			return resource.SubstratePlan{}, err
		}
		if owner.TenantID, err = p.store.PoolOwner(ctx, ev.PoolID); err != nil {
			return resource.SubstratePlan{}, err
		}
	}
	if acc != nil && !lifecycle.UsableBy(*acc, ev.TenantID) {
		acc = nil // its regions are not the tenant's to see
	}
	var in Input
	st := model.PoolState{Owner: owner, Account: acc}
	if cur != nil {
		rd, err := p.store.ReadSubstrate(ctx, c.TenantID(), cur.ID)
		if err != nil {
			return resource.SubstratePlan{}, err
		}
		if rd == nil {
			return resource.SubstratePlan{}, errs.E(errs.Unavailable, "substrate %s changed while it was read; retry", cur.ID)
		}
		in = Input{Substrate: rd.Substrate, PreviousGone: rd.PreviousGone, Cluster: rd.Cluster, Adopted: rd.Adopted, Pools: rd.Pools}
		st.Current = &in.Substrate
	}
	// As the event would be applied, but for its version, which is not
	// compared (the index is left zero), and a new substrate, previewed
	// as though the pool's last were gone: the plan shows that one's
	// teardown first.
	now := p.now().UTC()
	d := lifecycle.DecidePoolEvent(ev, st, "", now)
	plan := resource.SubstratePlan{Actions: []resource.PlanAction{}}
	var last *model.Substrate
	if d.Next != nil {
		in.Substrate.Spec = *d.Next
		acts, s := Preview(in, nil, now)
		plan.Actions = append(plan.Actions, acts...)
		last = &s
	}
	if d.New != nil {
		acts, s, err := p.previewNew(ctx, *d.New, acc, now)
		if err != nil {
			return resource.SubstratePlan{}, err
		}
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

// previewNew is the preview of a new substrate sub: the cluster it would
// adopt read as its run would read it, the zones it would take its
// account's (acc, nil when the tenant may not use it) when it names none.
func (p *Previewer) previewNew(ctx context.Context, sub model.Substrate, acc *model.Account, now time.Time) ([]resource.PlanAction, model.Substrate, error) {
	in := Input{Substrate: sub}
	spec := sub.Spec
	if spec.Mode == resource.SubstrateAdopt {
		var err error
		if in.Cluster, in.Pools, err = p.store.ReadAdoption(ctx, sub.TenantID, spec.AdoptClusterID); err != nil {
			return nil, model.Substrate{}, err
		}
	}
	zones := spec.Zones
	if len(zones) == 0 && acc != nil {
		zones = acc.Regions[spec.Region]
	}
	acts, s := Preview(in, zones, now)
	return acts, s, nil
}
