package lifecycle

import (
	"time"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// Rules are the rules of this package that the store applies in its
// transactions (store.Rules), as methods, so that the store can take them
// without importing the domain it sits below. Each method is the function
// of the same name.
type Rules struct{}

func (Rules) DecideCreate(c model.ClusterCreate) (model.ClusterSpec, error) { return DecideCreate(c) }

func (Rules) NewCluster(id, tenantID string, spec model.ClusterSpec, pools int, now time.Time) model.Cluster {
	return NewCluster(id, tenantID, spec, pools, now)
}

func (Rules) MayDeleteCluster(c *model.Cluster, usedBy map[string]string) error {
	return MayDeleteCluster(c, usedBy)
}

func (Rules) DeleteCluster(c *model.Cluster, pools []*model.NodePool, now time.Time) bool {
	return DeleteCluster(c, pools, now)
}

func (Rules) ClusterCreated(c *model.Cluster, now time.Time) []event.Event {
	return ClusterCreated(c, now)
}

func (Rules) NodePoolCreated(p *model.NodePool, now time.Time) []event.Event {
	return NodePoolCreated(p, now)
}

func (Rules) NodeJoined(s *model.Substrate, n resource.SubstrateNode) []event.Event {
	return NodeJoined(s, n)
}

func (Rules) NewNodePool(id, tenantID, clusterID string, spec model.NodePoolSpec, now time.Time) model.NodePool {
	return NewNodePool(id, tenantID, clusterID, spec, now)
}

func (Rules) Managed(spec model.NodePoolSpec, substrate, pool string) model.NodePoolSpec {
	return Managed(spec, substrate, pool)
}

func (Rules) MayChange(substrate, managedBy, pool, what, name string) error {
	return MayChange(substrate, managedBy, pool, what, name)
}

func (Rules) MayAddNodePool(substrate string, c *model.Cluster) error {
	return MayAddNodePool(substrate, c)
}

func (Rules) AddNodePool(c *model.Cluster, spec *model.NodePoolSpec, nameTaken bool, now time.Time) error {
	return AddNodePool(c, spec, nameTaken, now)
}

func (Rules) ResizeNodePool(c *model.Cluster, p *model.NodePool, resize model.Resize, now time.Time) error {
	return ResizeNodePool(c, p, resize, now)
}

func (Rules) DeleteNodePool(c *model.Cluster, p *model.NodePool, now time.Time) bool {
	return DeleteNodePool(c, p, now)
}

func (Rules) DecidePoolEvent(ev model.PoolEvent, st model.PoolState, newID string, now time.Time) model.PoolDecision {
	return DecidePoolEvent(ev, st, newID, now)
}

func (Rules) DecideRefusal(idx model.PoolIndex, cur *model.Substrate, version int64, problem string, now time.Time) (*model.SubstrateSpec, model.PoolIndex) {
	return DecideRefusal(idx, cur, version, problem, now)
}

func (Rules) Adopts(c *model.Cluster, substrate, pool string) bool { return Adopts(c, substrate, pool) }

func (Rules) OtherAdopters(c *model.Cluster, substrate string) []string {
	return OtherAdopters(c, substrate)
}

func (Rules) DecideAdoption(r model.AdoptionRequest) (model.Adoption, error) {
	return DecideAdoption(r)
}

func (Rules) Releases(c *model.Cluster, substrate string) bool { return Releases(c, substrate) }

func (Rules) CheckSeedPools(accounts []model.Account, pools []model.Pool) error {
	return CheckSeedPools(accounts, pools)
}

func (Rules) CheckSeedTenants(tenants []model.SeedTenant) error { return CheckSeedTenants(tenants) }
