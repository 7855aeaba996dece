package lifecycle

import (
	"maps"
	"slices"

	"github.com/better-compute/kubernetes/shared/model"
)

// The rules of a cluster's adoption by substrates (API.md §9), in one
// place: who holds an adopted cluster (Adopts), what an adoption writes
// (DecideAdoption) and what a release does (Releases). The store reads
// what they need in its transaction and writes what they decide; which
// substrate may adopt at all is MayAdopt's.

// Adopts reports whether cluster c records its adoption by substrate of
// pool.
func Adopts(c *model.Cluster, substrate, pool string) bool {
	return c.AdoptedBy[substrate] == pool
}

// OtherAdopters are the substrates other than substrate that adopted
// cluster c, by ID: those an adoption by substrate reads, to drop the
// ones that are gone (DecideAdoption).
func OtherAdopters(c *model.Cluster, substrate string) []string {
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(c.AdoptedBy)) {
		if id != substrate {
			ids = append(ids, id)
		}
	}
	return ids
}

// DecideAdoption is what r's adoption writes, or why it is refused. An
// adoption left by a substrate that is gone (deleted without releasing
// the cluster, its run killed) is dropped, so that it does not hold the
// cluster for ever; the rest is MayAdopt's, on the cluster without those.
// Of two substrates that both want the cluster, the one whose adoption
// is recorded first holds it while it is active: the other is refused.
// r.Cluster is not changed.
func DecideAdoption(r model.AdoptionRequest) (model.Adoption, error) {
	var a model.Adoption
	c := *r.Cluster
	c.AdoptedBy = maps.Clone(r.Cluster.AdoptedBy)
	for _, id := range OtherAdopters(r.Cluster, r.Substrate) {
		if other := r.Adopters[id]; other == nil || !other.Active {
			delete(c.AdoptedBy, id)
			a.Drop = append(a.Drop, id)
		}
	}
	if err := MayAdopt(&c, r.Substrate, r.AccountID); err != nil {
		return model.Adoption{}, err
	}
	a.Record = !Adopts(&c, r.Substrate, r.Pool)
	return a, nil
}

// Releases reports whether substrate's release of cluster c removes
// anything: a substrate releases its own adoption and nothing else, and
// releasing a cluster it does not hold is a no-op.
func Releases(c *model.Cluster, substrate string) bool {
	_, ok := c.AdoptedBy[substrate]
	return ok
}
