package input

import (
	"fmt"
	"regexp"

	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
)

// A pool event (API.md §9) is another module's data, not a request to this
// API: members this project does not read are ignored rather than refused,
// since the pools module may add its own. What this project reads is
// checked as strictly as a request.

// PoolUpdated is the data of compute.pool.updated, as far as this project
// reads it. Substrate is nil when the pool's policy asks for no Kubernetes
// substrate.
type PoolUpdated struct {
	PoolArchived
	Substrate *SubstratePolicy `json:"-" validate:"-"`
	// Flavors are the pool's flavors, each with its own name as its node
	// pool's name (the consumer names the pool).
	Flavors []model.Flavor `json:"-" validate:"-"`
}

// Want is the substrate the pool asks for, as the store holds it: nil
// when its policy asks for none. Each flavor's node pool is named as the
// flavor; the substrate names its node pools (substrates.Named), and
// lifecycle checks the account (lifecycle.PoolWant).
func (p *PoolUpdated) Want() *model.SubstrateSpec {
	if p.Substrate == nil {
		return nil
	}
	pol := p.Substrate
	s := &model.SubstrateSpec{PoolVersion: p.Version, AccountID: pol.Account, Flavors: p.Flavors}
	switch {
	case pol.Create != nil:
		s.Mode = resource.SubstrateCreate
		s.Region, s.Zones, s.ReleaseChannel = pol.Create.Region, pol.Create.Zones, pol.Create.ReleaseChannel
	case pol.Adopt != nil:
		s.Mode = resource.SubstrateAdopt
		s.AdoptClusterID = pol.Adopt.ClusterID
	}
	return s
}

// SubstratePolicy is policy.substrate of kind kubernetes: the account and
// either the cluster to create or the one to adopt.
type SubstratePolicy struct {
	Account string        `json:"account" validate:"token"`
	Create  *CreatePolicy `json:"create,omitempty"`
	Adopt   *AdoptPolicy  `json:"adopt,omitempty"`
}

// CreatePolicy is policy.substrate.cluster.create.
type CreatePolicy struct {
	Region         string   `json:"region" validate:"region"`
	Zones          []string `json:"zones" validate:"max=10,dive,zone"`
	ReleaseChannel string   `json:"releaseChannel" validate:"oneof=rapid regular stable"`
}

// AdoptPolicy is policy.substrate.cluster.adopt.
type AdoptPolicy struct {
	ClusterID string `json:"clusterId" validate:"clusterid"`
}

// PoolArchived is the data of compute.pool.archived, and what identifies
// the pool and its version in both events.
type PoolArchived struct {
	ID       string `json:"id" validate:"token"`
	TenantID string `json:"tenantId" validate:"token"`
	Version  int64  `json:"version" validate:"between=1:9007199254740991"`
}

// MaxFlavors is the most flavors a substrate's pool may have.
const MaxFlavors = 8

var flavorName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,18}[a-z0-9])?$`)

// flavorRule says what flavorName accepts.
const flavorRule = "must be 1 to 20 lowercase letters, digits or '-', starting with a letter and not ending with '-'"

// DecodePoolUpdated decodes and checks the data of compute.pool.updated.
// On error, the returned event still carries whatever id, tenantId and
// version could be read (zero otherwise), so that the consumer can put a
// known pool's substrate in error with the reason.
func DecodePoolUpdated(data []byte) (*PoolUpdated, error) {
	p := &PoolUpdated{}
	err := decode(data, p.decode)
	return p, err
}

// decode reads the pool from the object f, wherever it is in the body.
func (p *PoolUpdated) decode(f *fields) {
	p.decodeHead(f)
	policy := f.object("policy", false)
	if policy == nil {
		return
	}
	sub := policy.object("substrate", false)
	if sub == nil {
		return
	}
	if kind, _ := sub.str("kind", true, false); kind != "kubernetes" {
		return // another kind of substrate is not this project's
	}
	p.Substrate = decodeSubstrate(sub)
	p.Flavors = decodeFlavors(f)
}

func decodeSubstrate(f *fields) *SubstratePolicy {
	s := &SubstratePolicy{}
	s.Account, _ = f.str("account", true, false)
	f.r.check(f.path, s)
	c := f.object("cluster", true)
	if c == nil {
		return s
	}
	create, adopt := c.object("create", false), c.object("adopt", false)
	switch {
	case create != nil && adopt != nil:
		f.r.add(keyPath(c.path, "adopt"), "must not be given with create: a substrate creates its cluster or adopts one")
	case create != nil:
		s.Create = &CreatePolicy{}
		s.Create.Region, _ = create.str("region", true, false)
		s.Create.Zones = create.strings("zones")
		var ok bool
		if s.Create.ReleaseChannel, ok = create.str("releaseChannel", false, true); !ok && !create.present("releaseChannel") {
			s.Create.ReleaseChannel = DefaultReleaseChannel
		}
		create.rest(unknown)
		f.r.check(create.path, s.Create)
		f.r.checkUnique(joinPath(create.path, "zones"), s.Create.Zones)
	case adopt != nil:
		s.Adopt = &AdoptPolicy{}
		s.Adopt.ClusterID, _ = adopt.str("clusterId", true, false)
		adopt.rest(unknown)
		f.r.check(adopt.path, s.Adopt)
	default:
		if f.r.ok(c.path) {
			f.r.add(c.path, "must have create or adopt")
		}
	}
	c.rest(unknown)
	return s
}

// decodeFlavors reads the pool's flavors: 1 to MaxFlavors node pool specs
// whose names follow the flavor rule and are unique.
func decodeFlavors(f *fields) []model.Flavor {
	at := keyPath(f.path, "flavors")
	list := f.array("flavors")
	if list == nil {
		if f.r.ok(at) {
			f.r.add(at, fmt.Sprintf("is required for a kubernetes substrate: 1 to %d flavors", MaxFlavors))
		}
		return nil
	}
	if len(list) == 0 || len(list) > MaxFlavors {
		f.r.add(at, fmt.Sprintf("must have 1 to %d flavors", MaxFlavors))
	}
	out := make([]nodePoolSpec, len(list))
	seen := map[string]int{}
	for i, v := range list {
		path := indexPath(at, i)
		fl := asObject(f.r, path, v)
		if fl == nil {
			continue
		}
		decodeSpec(fl, &out[i])
		out[i].check(f.r, path)
		name := out[i].Name
		np := path + ".name"
		// A name that breaks the node pool rule (1 to 40 ...) breaks the
		// narrower flavor rule too, which is the one to state.
		f.r.reword(np, patterns["name"].reason, flavorRule)
		if !f.r.ok(np) {
			continue
		}
		if !flavorName.MatchString(name) {
			f.r.add(np, flavorRule)
			continue
		}
		if j, dup := seen[name]; dup {
			f.r.add(np, fmt.Sprintf("duplicates %s.name: flavor names are unique in a pool", indexPath(at, j)))
			continue
		}
		seen[name] = i
	}
	flavors := make([]model.Flavor, len(out))
	for i := range out {
		flavors[i] = model.Flavor{Name: out[i].Name, NodePool: out[i].spec()}
	}
	return flavors
}

// DecodePoolArchived decodes and checks the data of compute.pool.archived.
func DecodePoolArchived(data []byte) (*PoolArchived, error) {
	p := &PoolArchived{}
	err := decode(data, p.decodeHead)
	return p, err
}

// decodeHead reads and checks the pool's id, tenantId and version.
func (p *PoolArchived) decodeHead(f *fields) {
	p.ID, _ = f.str("id", true, false)
	p.TenantID, _ = f.str("tenantId", true, false)
	if v, ok := f.int("version", true); ok {
		p.Version = int64(v)
	}
	f.r.check(f.path, p)
}
