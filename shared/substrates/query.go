package substrates

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/better-compute/kubernetes/shared/auth"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/input"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
)

// Queries answers kubernetesSubstrates.get, list and listNodes.
type Queries struct {
	store *store.Store
}

// NewQueries returns the substrates' queries over the store.
func NewQueries(s *store.Store) *Queries { return &Queries{store: s} }

// onCluster is a substrate as the authorizer reads it: its cluster, or
// the tenant while it has none. Reading a substrate takes
// compute:kubernetes:read there.
func onCluster(clusterID string) auth.Resource { return auth.Resource{ClusterID: clusterID} }

// Get returns a substrate that is not deleted. Reading it takes
// compute:kubernetes:read on its cluster, or on the tenant while it has
// none.
func (q *Queries) Get(ctx context.Context, c auth.Principal, id string) (resource.Substrate, error) {
	g, err := q.store.Grant(ctx, c)
	if err != nil {
		return resource.Substrate{}, err
	}
	d, err := q.get(ctx, c.TenantID(), id)
	if err != nil {
		return resource.Substrate{}, err
	}
	v := d.View()
	if err := auth.Authorize(c, g, auth.PermRead, onCluster(v.ClusterID)); err != nil {
		return resource.Substrate{}, err
	}
	return v, nil
}

func (q *Queries) get(ctx context.Context, tenantID, id string) (*lifecycle.Substrate, error) {
	d, err := q.store.Substrate(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	if d == nil || !d.Active {
		return nil, errs.E(errs.NotFound, "substrate %s not found", id)
	}
	return d, nil
}

// List returns the tenant's substrates that are not deleted and that the
// caller may read, of one pool when poolID is set, by creation.
func (q *Queries) List(ctx context.Context, c auth.Principal, poolID string) ([]resource.Substrate, error) {
	g, err := q.store.Grant(ctx, c)
	if err != nil {
		return nil, err
	}
	subs, err := q.store.ActiveSubstrates(ctx, c.TenantID(), poolID)
	if err != nil {
		return nil, err
	}
	out := []resource.Substrate{}
	for _, d := range subs {
		v := d.View()
		if auth.Authorize(c, g, auth.PermRead, onCluster(v.ClusterID)) == nil {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		// A member who may read nothing here learns nothing either.
		if err := auth.Authorize(c, g, auth.PermRead, onCluster("")); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// nodesPage is a listNodes page token: the last node name, bound to the
// tenant and substrate so a token is not replayed elsewhere.
type nodesPage struct {
	TenantID    string `json:"t"`
	SubstrateID string `json:"s"`
	After       string `json:"a"`
}

// ListNodes returns a page of the substrate's joined nodes, by name.
func (q *Queries) ListNodes(ctx context.Context, c auth.Principal, id string, pageSize int, pageToken string) ([]resource.SubstrateNode, string, error) {
	g, err := q.store.Grant(ctx, c)
	if err != nil {
		return nil, "", err
	}
	d, err := q.get(ctx, c.TenantID(), id)
	if err != nil {
		return nil, "", err
	}
	if err := auth.Authorize(c, g, auth.PermRead, onCluster(d.View().ClusterID)); err != nil {
		return nil, "", err
	}
	after := ""
	if pageToken != "" {
		var p nodesPage
		b, err := base64.RawURLEncoding.DecodeString(pageToken)
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		if err != nil || p.TenantID != c.TenantID() || p.SubstrateID != id || p.After == "" {
			return nil, "", errs.InvalidFields([]errs.FieldError{{Field: "pageToken", Reason: "is not a page token of this list"}})
		}
		after = p.After
	}
	nodes, err := q.store.JoinedNodes(ctx, c.TenantID(), id, after, pageSize+1)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(nodes) > pageSize {
		nodes = nodes[:pageSize]
		b, _ := json.Marshal(nodesPage{TenantID: c.TenantID(), SubstrateID: id, After: nodes[len(nodes)-1].Name})
		next = base64.RawURLEncoding.EncodeToString(b)
	}
	return nodes, next, nil
}

// Plan answers kubernetesSubstrates.plan: what the pool's substrate would
// do if the pool's next event were p, action by action, and the substrate
// as it would be once converged (Preview), changing nothing. Reading it
// takes compute:kubernetes:read on the substrate's cluster, or on the
// tenant while it has none. The pool's version is not compared with the
// last one applied.
func (q *Queries) Plan(ctx context.Context, c auth.Principal, p *input.PoolUpdated) (resource.SubstratePlan, error) {
	g, err := q.store.Grant(ctx, c)
	if err != nil {
		return resource.SubstratePlan{}, err
	}
	subs, err := q.store.ActiveSubstrates(ctx, c.TenantID(), p.ID)
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
	if err := auth.Authorize(c, g, auth.PermRead, onCluster(clusterID)); err != nil {
		return resource.SubstratePlan{}, err
	}
	ev, acc, err := desired(ctx, q.store, &p.PoolArchived, p)
	if err != nil {
		return resource.SubstratePlan{}, err
	}
	want := ev.Want
	if want != nil {
		owner, err := q.store.PoolOwner(ctx, p.ID)
		if err != nil {
			return resource.SubstratePlan{}, err
		}
		if owner != "" && owner != c.TenantID() {
			w := *want
			w.Problem = fmt.Sprintf("pool ID %s is another tenant's pool: it cannot be used", p.ID)
			want = &w
		}
	}
	now := time.Now().UTC()
	plan := resource.SubstratePlan{Actions: []resource.PlanAction{}}
	var last *lifecycle.Substrate
	if cur != nil {
		rd, err := q.store.ReadSubstrate(ctx, c.TenantID(), cur.ID)
		if err != nil {
			return resource.SubstratePlan{}, err
		}
		if rd == nil {
			return resource.SubstratePlan{}, errs.E(errs.Unavailable, "substrate %s changed while it was read; retry", cur.ID)
		}
		in := Input{Substrate: rd.Substrate, PreviousGone: rd.PreviousGone, Cluster: rd.Cluster, Adopted: rd.Adopted, Pools: rd.Pools}
		spec := in.Substrate.Spec
		if want == nil || !lifecycle.SameChoice(spec, *want) {
			spec.Deleting = true
		} else {
			spec = *want
			spec.After = in.Substrate.Spec.After
		}
		// The event would make a new generation (store.ApplyPoolEvent).
		spec.Generation = in.Substrate.Spec.Generation + 1
		spec.PoolVersion = p.Version
		in.Substrate.Spec = spec
		acts, s := Preview(in, nil, now)
		plan.Actions = append(plan.Actions, acts...)
		last = &s
		if spec.Deleting {
			cur = nil
		}
	}
	if want != nil && cur == nil {
		spec := *want
		spec.Generation, spec.UpdatedAt = 1, now
		in := Input{Substrate: lifecycle.Substrate{TenantID: c.TenantID(), PoolID: p.ID, CreatedAt: now, Active: true, Spec: spec,
			Status: lifecycle.SubstrateStatus{State: resource.StatePending}}}
		if spec.Mode == resource.SubstrateAdopt {
			if in.Cluster, in.Pools, err = q.store.ReadAdoption(ctx, c.TenantID(), spec.AdoptClusterID); err != nil {
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
