package input

import (
	"fmt"
	"maps"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// The release channel a cluster gets when the body names none.
const (
	ChannelRegular = "regular"

	DefaultReleaseChannel = ChannelRegular
)

// CreateCluster is a decoded kubernetesClusters.create, with defaults
// applied (the release channel): the tenant's cluster to make on a
// provider pool, and the specs of its first node pools.
type CreateCluster struct {
	TenantID string
	PoolID   string
	// IdempotencyKey is "" when the body has none.
	IdempotencyKey string
	// Spec has the name, mode, region, release channel and labels the
	// body gives; the store adds what the pool and its account say.
	Spec model.ClusterSpec
	// NodePools are a standard cluster's first node pools (1 to
	// resource.MaxNodePools, names unique); an autopilot cluster has none.
	NodePools []model.NodePoolSpec
	body      createClusterBody
}

// createClusterBody is the body of kubernetesClusters.create.
type createClusterBody struct {
	TenantID       string `json:"tenantId" validate:"token"`
	PoolID         string `json:"poolId" validate:"token"`
	Name           string `json:"name" validate:"name"`
	Mode           string `json:"mode" validate:"oneof=standard autopilot"`
	Region         string `json:"region" validate:"region"`
	ReleaseChannel string `json:"releaseChannel" validate:"oneof=rapid regular stable"`
	// NodePools are checked on their own, at nodePools[i].
	NodePools []nodePoolSpec `json:"nodePools" validate:"-"`
	// Labels are checked by hand with Kubernetes' rules, as a pool's.
	Labels map[string]string `json:"labels"`
	// IdempotencyKey is "" when the body has none.
	IdempotencyKey string `json:"idempotencyKey,omitempty" validate:"omitempty,token"`
}

// clusterPoolReason is why a cluster's node pool may not name what the
// cluster gives it.
var clusterPoolReason = map[string]string{
	"tenantId":       "not allowed in a cluster's node pool: it is the cluster's",
	"clusterId":      "not allowed in a cluster's node pool: it is the cluster's",
	"idempotencyKey": "not allowed in a cluster's node pool: give the cluster's idempotencyKey",
}

// DecodeCreateCluster decodes and validates the body of
// kubernetesClusters.create. Any problem is an *errs.Error of kind
// errs.Invalid listing every broken field. Whether the region and zones are
// the account's is the store's to say (lifecycle.ClusterZones).
func DecodeCreateCluster(body []byte) (*CreateCluster, error) {
	c := createClusterBody{}
	err := decode(body, func(f *fields) {
		c.TenantID, _ = f.str("tenantId", true, false)
		c.PoolID, _ = f.str("poolId", true, false)
		c.Name, _ = f.str("name", true, false)
		c.Mode, _ = f.str("mode", true, false)
		c.Region, _ = f.str("region", true, false)
		var ok bool
		if c.ReleaseChannel, ok = f.str("releaseChannel", false, true); !ok && !f.present("releaseChannel") {
			c.ReleaseChannel = DefaultReleaseChannel
		}
		pools := f.array("nodePools")
		if pools != nil {
			c.NodePools = make([]nodePoolSpec, len(pools))
		}
		for i, v := range pools {
			p := asObject(f.r, indexPath("nodePools", i), v)
			if p == nil {
				continue
			}
			decodeSpec(p, &c.NodePools[i])
			p.rest(func(key string) string {
				if r, ok := clusterPoolReason[key]; ok {
					return r
				}
				return "unknown field"
			})
		}
		c.Labels = f.stringMap("labels")
		c.IdempotencyKey, _ = f.str("idempotencyKey", false, false)
		f.rest(unknown)
		c.check(f.r)
	})
	if err != nil {
		return nil, err
	}
	out := &CreateCluster{TenantID: c.TenantID, PoolID: c.PoolID, IdempotencyKey: c.IdempotencyKey, body: c}
	labels := maps.Clone(c.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	out.Spec = model.ClusterSpec{Name: c.Name, Mode: c.Mode, Region: c.Region, ReleaseChannel: c.ReleaseChannel, Labels: labels}
	for i := range c.NodePools {
		out.NodePools = append(out.NodePools, c.NodePools[i].spec())
	}
	return out, nil
}

func (c *createClusterBody) check(r *report) {
	r.check("", c)
	for i := range c.NodePools {
		c.NodePools[i].check(r, indexPath("nodePools", i))
	}
	switch c.Mode {
	case resource.ModeStandard:
		if len(c.NodePools) == 0 {
			r.add("nodePools", fmt.Sprintf("is required for a standard cluster: 1 to %d node pools", resource.MaxNodePools))
		} else if len(c.NodePools) > resource.MaxNodePools {
			r.add("nodePools", fmt.Sprintf("must have at most %d node pools", resource.MaxNodePools))
		}
	case resource.ModeAutopilot:
		if len(c.NodePools) > 0 {
			r.add("nodePools", "must be empty for an autopilot cluster: the provider runs its nodes")
		}
	}
	names := make([]string, len(c.NodePools))
	for i, p := range c.NodePools {
		names[i] = p.Name
	}
	seen := map[string]int{}
	for i, n := range names {
		p := indexPath("nodePools", i) + ".name"
		if !r.ok(p) {
			continue
		}
		if j, dup := seen[n]; dup {
			r.add(p, fmt.Sprintf("duplicates nodePools[%d].name: node pool names are unique in a cluster", j))
			continue
		}
		seen[n] = i
	}
	r.checkLabels("labels", c.Labels)
}

// Canonical is the request in a deterministic JSON form without its
// idempotency key, with defaults applied: two requests that ask for the same
// cluster have equal Canonical forms. Node pools and zones keep their order.
func (c *CreateCluster) Canonical() []byte {
	n := c.body
	n.IdempotencyKey = ""
	n.NodePools = make([]nodePoolSpec, len(c.body.NodePools))
	for i, p := range c.body.NodePools {
		n.NodePools[i] = p.normalized()
	}
	n.Labels = maps.Clone(c.body.Labels)
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	return canonical(n)
}

// Page sizes of kubernetesClusters.list.
const (
	DefaultPageSize = 50
	MaxPageSize     = 100
	// MaxPageTokenLen bounds the opaque page token; the list decodes it.
	MaxPageTokenLen = 1024
)

// ListClusters is the body of kubernetesClusters.list, with defaults
// applied (PageSize).
type ListClusters struct {
	TenantID string `json:"tenantId" validate:"token"`
	// PoolID is "" for clusters of every pool.
	PoolID   string `json:"poolId,omitempty" validate:"omitempty,token"`
	PageSize int    `json:"pageSize" validate:"between=1:100"`
	// PageToken is "" for the first page; otherwise the nextPageToken of
	// the previous page, which only the list can tell valid.
	PageToken string `json:"pageToken,omitempty" validate:"max=1024"`
}

// DecodeListClusters decodes and validates the body of
// kubernetesClusters.list. Any problem is an *errs.Error of kind
// errs.Invalid.
func DecodeListClusters(body []byte) (*ListClusters, error) {
	l := &ListClusters{}
	err := decode(body, func(f *fields) {
		l.TenantID, _ = f.str("tenantId", true, false)
		l.PoolID, _ = f.str("poolId", false, false)
		var ok bool
		if l.PageSize, ok = f.int("pageSize", false); !ok && !f.present("pageSize") {
			l.PageSize = DefaultPageSize
		}
		l.PageToken, _ = f.str("pageToken", false, true)
		f.rest(unknown)
		f.r.check("", l)
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}
