// Package store keeps the Kubernetes API's state in Firestore: the data
// model of ARCHITECTURE.md, and every API mutation as one transaction of
// point reads and writes (desired state, outbox events and the reconcile
// kick together). The API's calls write only the specs of clusters and node
// pools; the reconciler's runs (SaveClusterRun) only their statuses. Its
// documents are model's plain values, and it holds no rule: the
// decisions a transaction applies are lifecycle's, handed to New as
// Rules, so the store sits below the domain (rules.go).
// Its reads for the API are decided by auth.Authorize too: clusters and
// node pools in their files, substrates in substratequeries.go.
//
// A mutation's answer tells the truth when Firestore's does not
// (API.md §2): every transaction of the API, the pool events and the join
// that writes anything also writes a receipt of its own, in the same
// commit, and a commit whose answer is lost (UNAVAILABLE or
// DEADLINE_EXCEEDED after Firestore may have stored it, or the client
// library's retry refused because the transaction ended) is resolved
// before the call returns, by reading the receipt back and, when it is
// not there, writing it as a fence so that the lost commit cannot land
// later: stored, the call returns what it stored, its events and kick
// included; not stored, the transaction runs again (up to three runs),
// then UNAVAILABLE; not learnable, UNAVAILABLE with the detail
// OUTCOME_UNKNOWN (errs.OutcomeUnknown). INTERNAL never stands for a
// write that was stored. The path without faults makes no more round
// trips: the receipt is one more write in the commit, and a transaction
// that decides to write nothing commits nothing (transact.go).
//
// Layout:
//
//	accounts/{accountId}                              Account
//	tenants/{t}                                       model.Tenant: its quota
//	                                                  (the seed's) and count of
//	                                                  clusters not deleted
//	pools/{poolId}                                    Pool, its first tenant's
//	tenants/{t}/members/{principal}                   auth.Member
//	tenants/{t}/clusters/{kcl}                        model.Cluster + chain.State
//	                                                  + sequence (of its events)
//	tenants/{t}/clusters/{kcl}/nodePools/{knp}        model.NodePool
//	tenants/{t}/clusters/{kcl}/nodePoolNames/{name}   reservation → knp
//	tenants/{t}/clusterNames/{name}                   reservation → kcl
//	tenants/{t}/idempotency/{hash}                    idempotency record
//	tenants/{t}/outbox/{eventId}                      event.Event
//	tenants/{t}/receipts/{random}                     a commit's receipt, or a
//	                                                  fence (transact.go)
//	tenants/{t}/substratePools/{poolId}               model.PoolIndex: a pool's last
//	                                                  version and substrates
//	tenants/{t}/substrates/{ksb}                      model.Substrate + chain.State
//	                                                  + sequence (of its events)
//	tenants/{t}/substrates/{ksb}/nodes/{node}         resource.SubstrateNode
//	joinTokens/{sha256 of the token}                  JoinGrant
//	providerBudgets/{project}/budgetShards/{minute}-{shard}
//	                                                  budgetShard: the GKE
//	                                                  calls taken (budget.go)
//
// Each {...} is DocID of the value: the value itself unless Firestore
// could not store it as it stands (docid.go).
//
// Every document path is built by the path functions of this file, on
// the tenant's document (TenantDoc); no other package opens the
// product's documents: the chain, the outbox's relay and the devstack's
// console read and write them through the store (chain.go, outbox.go,
// console.go).
package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/model"
)

// IdempotencyTTL is how long idempotency keys are kept at least (API.md §5).
const IdempotencyTTL = 24 * time.Hour

// Store reads and writes the API's state in Firestore.
type Store struct {
	fs    *firestore.Client
	rules Rules
	now   func() time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock (for tests); nil means the real one.
func WithClock(c clock.PassiveClock) Option {
	return func(s *Store) {
		if c != nil {
			s.now = c.Now
		}
	}
}

// New returns a store over fs that applies rules in its transactions
// (lifecycle.Rules{} is the product's).
func New(fs *firestore.Client, rules Rules, opts ...Option) (*Store, error) {
	if fs == nil {
		return nil, errors.New("store: New needs a Firestore client")
	}
	if rules == nil {
		return nil, errors.New("store: New needs the domain's rules (lifecycle.Rules)")
	}
	s := &Store{fs: fs, rules: rules, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Account is a provider account (model.Account).
type Account = model.Account

// Pool is a provider pool of a tenant, on one account (model.Pool).
type Pool = model.Pool

// clusterDoc is a cluster's document: the object and its reconcile chain.
type clusterDoc struct {
	model.Cluster
	Reconcile chain.State `firestore:"reconcile"`
	// Sequence is the last ce-sequence of the cluster's events, its node
	// pools' included (outbox.SequenceField).
	Sequence int64 `firestore:"sequence"`
}

type reservation struct {
	ID string `firestore:"id"`
}

type idempotencyRecord struct {
	RequestHash string    `firestore:"requestHash"`
	ResourceID  string    `firestore:"resourceId"`
	ClusterID   string    `firestore:"clusterId"`
	ExpireAt    time.Time `firestore:"expireAt"`
}

// The refs below are the store's paths: every element that comes from
// outside goes through DocID, so that any ID the contract accepts can be
// stored.

func (s *Store) accountRef(id string) *firestore.DocumentRef {
	return s.fs.Collection("accounts").Doc(DocID(id))
}

func (s *Store) poolRef(id string) *firestore.DocumentRef {
	return s.fs.Collection("pools").Doc(DocID(id))
}

func (s *Store) tenant(t string) *firestore.DocumentRef {
	return TenantDoc(s.fs, t)
}

// tenantRef is the tenant's own document (model.Tenant): its quota
// and the count of its clusters.
func (s *Store) tenantRef(t string) *firestore.DocumentRef {
	return s.tenant(t)
}

func (s *Store) memberRef(t, principal string) *firestore.DocumentRef {
	return s.tenant(t).Collection("members").Doc(DocID(principal))
}

// ClusterRef returns the document of a cluster.
func (s *Store) ClusterRef(t, clusterID string) *firestore.DocumentRef {
	return s.clusters(t).Doc(DocID(clusterID))
}

// NodePoolRef returns the document of a node pool.
func (s *Store) NodePoolRef(t, clusterID, nodePoolID string) *firestore.DocumentRef {
	return s.ClusterRef(t, clusterID).Collection("nodePools").Doc(DocID(nodePoolID))
}

func (s *Store) poolNameRef(t, clusterID, name string) *firestore.DocumentRef {
	return s.ClusterRef(t, clusterID).Collection("nodePoolNames").Doc(DocID(name))
}

func (s *Store) clusterNameRef(t, name string) *firestore.DocumentRef {
	return s.tenant(t).Collection("clusterNames").Doc(DocID(name))
}

func (s *Store) clusters(t string) *firestore.CollectionRef {
	return s.tenant(t).Collection(ClustersKind)
}

// SubstratesKind is the chain kind of substrates: the collection of their
// documents under each tenant, and the Kind of their kicks.
const SubstratesKind = "substrates"

func (s *Store) substrates(t string) *firestore.CollectionRef {
	return s.tenant(t).Collection(SubstratesKind)
}

func (s *Store) substrateRef(t, id string) *firestore.DocumentRef {
	return s.substrates(t).Doc(DocID(id))
}

func (s *Store) substrateNodes(t, substrateID string) *firestore.CollectionRef {
	return s.substrateRef(t, substrateID).Collection("nodes")
}

func (s *Store) substratePoolRef(t, poolID string) *firestore.DocumentRef {
	return s.tenant(t).Collection("substratePools").Doc(DocID(poolID))
}

func (s *Store) joinTokenRef(hash string) *firestore.DocumentRef {
	return s.fs.Collection("joinTokens").Doc(DocID(hash))
}

func (s *Store) idempotencyRef(t, scope, caller, key string) *firestore.DocumentRef {
	h := sha256.Sum256([]byte(scope + "\x00" + caller + "\x00" + key))
	return s.tenant(t).Collection("idempotency").Doc(DocID(hex.EncodeToString(h[:])))
}

// budgetShardRef is the document of one shard of a provider project's
// clock minute.
func (s *Store) budgetShardRef(project string, minute time.Time, shard int) *firestore.DocumentRef {
	id := fmt.Sprintf("%s-%d", minute.UTC().Format("200601021504"), shard)
	return s.fs.Collection("providerBudgets").Doc(DocID(project)).Collection("budgetShards").Doc(id)
}

// timestamp returns the store's now at Firestore's precision, so that a
// resource returned from a write equals the one read back later.
func (s *Store) timestamp() time.Time {
	return s.now().UTC().Truncate(time.Microsecond)
}

// RequestHash returns the hash of a canonical request, kept with an
// idempotency key to tell a retry from another request under the same key.
func RequestHash(canonical []byte) string {
	h := sha256.Sum256(canonical)
	return hex.EncodeToString(h[:])
}

// storageErr maps a Firestore failure to the domain's vocabulary: a backing
// service that is down is Unavailable (safe to retry), anything else
// Internal. Domain errors pass through unchanged.
func storageErr(op string, err error) error {
	var de *errs.Error
	if errors.As(err, &de) {
		return err
	}
	// The client's own retries of an unavailable backend end with its
	// deadline (a context error, not a gRPC status): still worth a retry.
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return errs.Wrap(errs.Unavailable, err, "storage is unavailable; retry")
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.ResourceExhausted:
		return errs.Wrap(errs.Unavailable, err, "storage is unavailable; retry")
	}
	return errs.Wrap(errs.Internal, err, "internal error in %s", op)
}
