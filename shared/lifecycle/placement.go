package lifecycle

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/model"
)

// The rules of where a cluster and its node pools may run (API.md §2, §5):
// a cluster's region is one of its account's, and a node pool's zones are
// among the zones of that region enabled on the account, which the
// cluster keeps in its spec from its creation on.

// CheckZones returns a field error for every zone (at path[i]) that is not
// among allowed, the zones of region enabled on the account. It only reads
// its arguments.
func CheckZones(path string, zones []string, region string, allowed []string) []errs.FieldError {
	var out []errs.FieldError
	for i, z := range zones {
		if !slices.Contains(allowed, z) {
			out = append(out, errs.FieldError{
				Field:  fmt.Sprintf("%s[%d]", path, i),
				Reason: fmt.Sprintf("is not a zone of region %s enabled on the account (%s)", region, listOrNone(allowed)),
			})
		}
	}
	return out
}

// ClusterZones returns the zones a new cluster may use: the zones it names
// (a substrate's policy may), or else all the zones of its region enabled
// on the account (regions: region → zones). Its region outside the
// account's regions, or a first node pool's zone outside the cluster's
// zones, is an INVALID_INPUT error naming region or nodePools[i].zones[j].
func ClusterZones(regions map[string][]string, spec *model.ClusterSpec, pools []model.NodePoolSpec) ([]string, error) {
	allowed, ok := regions[spec.Region]
	if !ok {
		names := slices.Sorted(maps.Keys(regions))
		return nil, errs.InvalidFields([]errs.FieldError{{
			Field:  "region",
			Reason: fmt.Sprintf("is not a region of the pool's account (%s)", listOrNone(names)),
		}})
	}
	if len(spec.Zones) > 0 {
		allowed = spec.Zones
	}
	var fields []errs.FieldError
	for i, p := range pools {
		fields = append(fields, CheckZones(fmt.Sprintf("nodePools[%d].zones", i), p.Zones, spec.Region, allowed)...)
	}
	if len(fields) > 0 {
		return nil, errs.InvalidFields(fields)
	}
	return slices.Clone(allowed), nil
}

func listOrNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

// Placement is why the region and zones of a substrate's cluster to
// create, and its flavors' zones, are not among the account's regions
// ("" when they are).
func Placement(s *model.SubstrateSpec, regions map[string][]string) string {
	allowed, ok := regions[s.Region]
	if !ok {
		return fmt.Sprintf("region %s is not enabled on account %s", s.Region, s.AccountID)
	}
	if fe := CheckZones("policy.substrate.cluster.create.zones", s.Zones, s.Region, allowed); len(fe) > 0 {
		return fe[0].Field + " " + fe[0].Reason
	}
	zones := allowed
	if len(s.Zones) > 0 {
		zones = s.Zones
	}
	for i, f := range s.Flavors {
		if fe := CheckZones(fmt.Sprintf("flavors[%d].zones", i), f.NodePool.Zones, s.Region, zones); len(fe) > 0 {
			return fe[0].Field + " " + fe[0].Reason
		}
	}
	return ""
}
