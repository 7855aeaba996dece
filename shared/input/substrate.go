package input

// SubstrateRef is the body of kubernetesSubstrates.get.
type SubstrateRef struct {
	TenantID    string `json:"tenantId" validate:"token"`
	SubstrateID string `json:"substrateId" validate:"substrateid"`
}

// DecodeSubstrateRef decodes and validates the body of
// kubernetesSubstrates.get.
func DecodeSubstrateRef(body []byte) (*SubstrateRef, error) {
	s := &SubstrateRef{}
	err := decode(body, func(f *fields) {
		s.TenantID, _ = f.str("tenantId", true, false)
		s.SubstrateID, _ = f.str("substrateId", true, false)
		f.rest(unknown)
		f.r.check("", s)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// ListSubstrates is the body of kubernetesSubstrates.list.
type ListSubstrates struct {
	TenantID string `json:"tenantId" validate:"token"`
	// PoolID is "" for the substrates of every pool.
	PoolID string `json:"poolId,omitempty" validate:"omitempty,token"`
}

// DecodeListSubstrates decodes and validates the body of
// kubernetesSubstrates.list.
func DecodeListSubstrates(body []byte) (*ListSubstrates, error) {
	l := &ListSubstrates{}
	err := decode(body, func(f *fields) {
		l.TenantID, _ = f.str("tenantId", true, false)
		l.PoolID, _ = f.str("poolId", false, false)
		f.rest(unknown)
		f.r.check("", l)
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// DefaultNodesPageSize is listNodes' page size when none is given.
const DefaultNodesPageSize = 100

// ListSubstrateNodes is the body of kubernetesSubstrates.listNodes.
type ListSubstrateNodes struct {
	TenantID    string `json:"tenantId" validate:"token"`
	SubstrateID string `json:"substrateId" validate:"substrateid"`
	PageSize    int    `json:"pageSize" validate:"between=1:1000"`
	PageToken   string `json:"pageToken,omitempty" validate:"max=1024"`
}

// DecodeListSubstrateNodes decodes and validates the body of
// kubernetesSubstrates.listNodes.
func DecodeListSubstrateNodes(body []byte) (*ListSubstrateNodes, error) {
	l := &ListSubstrateNodes{}
	err := decode(body, func(f *fields) {
		l.TenantID, _ = f.str("tenantId", true, false)
		l.SubstrateID, _ = f.str("substrateId", true, false)
		var ok bool
		if l.PageSize, ok = f.int("pageSize", false); !ok && !f.present("pageSize") {
			l.PageSize = DefaultNodesPageSize
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

// Join is the body of kubernetesSubstrates.join, sent by bcd on a node.
type Join struct {
	NodeName   string `json:"nodeName" validate:"max=253,nodename"`
	ProviderID string `json:"providerId" validate:"max=1024"`
}

// DecodeJoin decodes and validates the body of kubernetesSubstrates.join.
func DecodeJoin(body []byte) (*Join, error) {
	j := &Join{}
	err := decode(body, func(f *fields) {
		j.NodeName, _ = f.str("nodeName", true, false)
		j.ProviderID, _ = f.str("providerId", true, false)
		f.rest(unknown)
		f.r.check("", j)
	})
	if err != nil {
		return nil, err
	}
	return j, nil
}

// PlanSubstrate is the body of kubernetesSubstrates.plan: a pool as its
// compute.pool.updated event carries it, checked by the same rules.
type PlanSubstrate struct {
	TenantID string      `json:"tenantId" validate:"token"`
	Pool     PoolUpdated `json:"-" validate:"-"`
}

// DecodePlanSubstrate decodes and validates the body of
// kubernetesSubstrates.plan. The pool's fields are named under pool
// (pool.flavors[0].machineType); its tenantId must be the request's.
func DecodePlanSubstrate(body []byte) (*PlanSubstrate, error) {
	p := &PlanSubstrate{}
	err := decode(body, func(f *fields) {
		p.TenantID, _ = f.str("tenantId", true, false)
		if pool := f.object("pool", true); pool != nil {
			p.Pool.decode(pool)
			at := keyPath(pool.path, "tenantId")
			if p.TenantID != "" && p.Pool.TenantID != "" && p.Pool.TenantID != p.TenantID && f.r.ok(at) {
				f.r.add(at, "must be the request's tenantId")
			}
		}
		f.rest(unknown)
		f.r.check("", p)
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}
