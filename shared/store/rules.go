package store

import (
	"time"

	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// Rules are the domain's decisions the store applies inside its
// transactions, to the documents it read there: who may change what,
// what a create, a resize or a delete does and which events it makes,
// what an event of a pool and an adoption write, what a seed may hold.
// The store holds none of them, so that each is written once, in the
// domain, and tested there with plain values; lifecycle.Rules is the product's, handed to New by
// whoever builds a store. Taking them as a value, rather than importing
// lifecycle, keeps the store below the domain, as ARCHITECTURE.md's
// Layers draw it.
type Rules interface {
	// Clusters (lifecycle's cluster.go, clustercreate.go, managed.go).
	DecideCreate(c model.ClusterCreate) (model.ClusterSpec, error)
	NewCluster(id, tenantID string, spec model.ClusterSpec, pools int, now time.Time) model.Cluster
	MayDeleteCluster(c *model.Cluster, usedBy map[string]string) error
	DeleteCluster(c *model.Cluster, pools []*model.NodePool, now time.Time) bool
	ClusterCreated(c *model.Cluster, now time.Time) []event.Event

	// Node pools (nodepool.go, managed.go).
	NewNodePool(id, tenantID, clusterID string, spec model.NodePoolSpec, now time.Time) model.NodePool
	Managed(spec model.NodePoolSpec, substrate, pool string) model.NodePoolSpec
	MayChange(substrate, managedBy, pool, what, name string) error
	MayAddNodePool(substrate string, c *model.Cluster) error
	AddNodePool(c *model.Cluster, spec *model.NodePoolSpec, nameTaken bool, now time.Time) error
	ResizeNodePool(c *model.Cluster, p *model.NodePool, resize model.Resize, now time.Time) error
	DeleteNodePool(c *model.Cluster, p *model.NodePool, now time.Time) bool
	NodePoolCreated(p *model.NodePool, now time.Time) []event.Event

	// Pools' events and adoptions (poolevent.go, adoption.go).
	DecidePoolEvent(ev model.PoolEvent, st model.PoolState, newID string, now time.Time) model.PoolDecision
	DecideRefusal(idx model.PoolIndex, cur *model.Substrate, version int64, problem string, now time.Time) (*model.SubstrateSpec, model.PoolIndex)
	Adopts(c *model.Cluster, substrate, pool string) bool
	OtherAdopters(c *model.Cluster, substrate string) []string
	DecideAdoption(r model.AdoptionRequest) (model.Adoption, error)
	Releases(c *model.Cluster, substrate string) bool

	// Substrates' nodes (substrate.go).
	NodeJoined(s *model.Substrate, n resource.SubstrateNode) []event.Event

	// The seed (seed.go).
	CheckSeedPools(accounts []model.Account, pools []model.Pool) error
	CheckSeedTenants(tenants []model.SeedTenant) error
}
