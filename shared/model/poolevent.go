package model

// PoolEvent is what one event of the pools module asks of its pool's
// substrate, as decoded at the edge.
type PoolEvent struct {
	TenantID string
	PoolID   string
	Version  int64
	// Want is the substrate the pool asks for, its flavors' node pools
	// named; nil when it asks for none (archived, or no substrate in its
	// policy). Its Generation, UpdatedAt and After are set when it is
	// recorded, by the rule of lifecycle.ChangePool.
	Want *SubstrateSpec
	// Archived: the event archives the pool (Want is nil). An archive at
	// the version of the last update applied is applied too, so that
	// even a pool at the greatest version can be archived.
	Archived bool
}

// PoolIndex is what the project knows of a pool of the pools module, at
// tenants/{tenantId}/substratePools/{poolId}: the last version applied and
// the substrate the pool asks for now.
type PoolIndex struct {
	Version     int64  `firestore:"version"`
	SubstrateID string `firestore:"substrateId"` // "" when the pool asks for none
	// Last is the pool's latest substrate, deleting or not: a new one
	// waits for it to be deleted.
	Last string `firestore:"last"`
	// Archived: an archive event was applied. Archival is final: no
	// later event of the pool changes anything.
	Archived bool `firestore:"archived,omitempty"`
}

// Pool is a provider pool of a tenant, on one account, stored at
// pools/{poolId}: a pool ID belongs to the tenant that first announced it
// (seeded, or by an event).
type Pool struct {
	ID        string `firestore:"id" json:"id"`
	TenantID  string `firestore:"tenantId" json:"tenantId"`
	AccountID string `firestore:"accountId" json:"accountId"`
	// Archived: the pools module archived the pool. Its clusters stay
	// their tenant's, and manageable; it takes no new cluster.
	Archived bool `firestore:"archived,omitempty" json:"archived,omitempty"`
}

// PoolState is what the store holds of an event's pool when the event is
// applied.
type PoolState struct {
	Index PoolIndex
	// Owner is the record of the pool's ID (pools/{poolId}); zero when
	// there is none.
	Owner Pool
	// Account is the account the event's Want names; nil when there is
	// none, or the event wants no substrate.
	Account *Account
	// Current is the substrate the pool asks for now (Index.SubstrateID);
	// nil when there is none.
	Current *Substrate
}

// PoolDecision is what applying an event writes.
type PoolDecision struct {
	// Ignored, when set, says why nothing is written.
	Ignored string
	// Index is the pool's index to write.
	Index PoolIndex
	// Pool, when set, is the record of the pool ID to write: the tenant's
	// pool, on the account its substrate uses.
	Pool *Pool
	// ArchivePool: mark the tenant's record of the pool ID archived. Its
	// clusters stay the tenant's, and manageable; it takes no new one.
	ArchivePool bool
	// Next replaces Current's spec (lifecycle.PoolChange.Next).
	Next *SubstrateSpec
	// New is the substrate to make, pending (lifecycle.PoolChange.New).
	New *Substrate
	// Foreign, when set, is the tenant that owns the pool's ID: the
	// event named it for another tenant, and nothing of the owner's
	// changes.
	Foreign string
	// Outcome says what became of the pool's substrates, for the log.
	Outcome string
}
