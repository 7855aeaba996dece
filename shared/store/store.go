// Package store keeps the Kubernetes API's state in Firestore: the data
// model of ARCHITECTURE.md, and every API mutation as one transaction of
// point reads and writes (desired state, outbox events and the reconcile
// kick together).
//
// Layout:
//
//	accounts/{accountId}                              Account
//	pools/{poolId}                                    Pool
//	tenants/{t}/members/{principal}                   auth.Member
//	tenants/{t}/clusters/{kcl}                        ClusterDoc
//	tenants/{t}/clusters/{kcl}/nodePools/{knp}        NodePoolDoc
//	tenants/{t}/clusters/{kcl}/nodePoolNames/{name}   reservation → knp
//	tenants/{t}/clusterNames/{name}                   reservation → kcl
//	tenants/{t}/idempotency/{hash}                    idempotency record
//	tenants/{t}/outbox/{eventId}                      outbox.Event
package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/resource"
)

// IdempotencyTTL is how long idempotency keys are kept at least (API.md §5).
const IdempotencyTTL = 24 * time.Hour

// DeletedTTL is how long the documents of deleted pools and clusters are
// kept, for idempotent replays and audits, before Firestore's TTL policy on
// expireAt removes them.
const DeletedTTL = 30 * 24 * time.Hour

// Store reads and writes the API's state in Firestore.
type Store struct {
	fs  *firestore.Client
	now func() time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithNow sets the clock (for tests).
func WithNow(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New returns a store over fs.
func New(fs *firestore.Client, opts ...Option) (*Store, error) {
	if fs == nil {
		return nil, errors.New("store: New needs a Firestore client")
	}
	s := &Store{fs: fs, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Client returns the Firestore client of the store.
func (s *Store) Client() *firestore.Client { return s.fs }

// Account is a provider account: which provider, which cloud project, and
// the zones of each region enabled on it.
type Account struct {
	ID       string              `firestore:"id" json:"id"`
	Provider string              `firestore:"provider" json:"provider"`
	Project  string              `firestore:"project" json:"project"`
	Regions  map[string][]string `firestore:"regions" json:"regions"`
}

// ManagedKubernetes reports whether the account's provider provides managed
// Kubernetes; only gcp does.
func (a Account) ManagedKubernetes() bool { return a.Provider == "gcp" }

// Pool is a provider pool of a tenant, on one account.
type Pool struct {
	ID        string `firestore:"id" json:"id"`
	TenantID  string `firestore:"tenantId" json:"tenantId"`
	AccountID string `firestore:"accountId" json:"accountId"`
}

// Reconcile is the reconcile chain of a cluster: the token of the one task
// chain allowed to run it, when it should run next, and the lease of the
// run in progress.
type Reconcile struct {
	Token       string    `firestore:"token"`
	NextAt      time.Time `firestore:"nextAt"`
	LeaseOwner  string    `firestore:"leaseOwner"`
	LeaseExpiry time.Time `firestore:"leaseExpiry"`
	Failures    int       `firestore:"failures"` // consecutive transient failures, for backoff
}

// Intent records a provider call about to be made, before it is made, so
// that a run killed between the call and recording its operation is
// followed by one that finds the operation instead of calling again.
type Intent struct {
	Kind      string    `firestore:"kind"`
	At        time.Time `firestore:"at"`
	NodeCount int       `firestore:"nodeCount"` // the size asked by a resize
}

// ProviderCluster is what the reconciler knows of the cluster at the
// provider. Only the reconciler writes it.
type ProviderCluster struct {
	// ID is the provider's unique ID of the cluster, so that a cluster
	// re-created under the same name is never taken for ours.
	ID            string  `firestore:"id"`
	Operation     string  `firestore:"operation"` // cluster-level operation in flight
	OperationKind string  `firestore:"operationKind"`
	Intent        *Intent `firestore:"intent"`
	EverReady     bool    `firestore:"everReady"` // kubernetes.cluster.ready was published
}

// ClusterDoc is the stored cluster: the resource and what the API and the
// reconciler keep beside it.
type ClusterDoc struct {
	resource.Cluster
	// Active is false once the cluster is deleted; list queries filter on it.
	Active bool `firestore:"active"`
	// ActivePoolCount counts the node pools that are not deleted, for the
	// quota without a count query.
	ActivePoolCount int `firestore:"activePoolCount"`
	// Project is the provider project of the cluster's account.
	Project string `firestore:"project"`
	// Zones are the zones of the cluster's region enabled on its account.
	Zones []string `firestore:"zones"`
	// Changed is set by the API when the tenant changes the cluster's
	// desired state, and cleared by the reconciler when it is ready again
	// (kubernetes.cluster.updated).
	Changed   bool            `firestore:"changed"`
	Reconcile Reconcile       `firestore:"reconcile"`
	Provider  ProviderCluster `firestore:"provider"`
	ExpireAt  *time.Time      `firestore:"expireAt"`
}

// ProviderPool is what the reconciler knows of the pool at the provider.
// Only the reconciler writes it.
type ProviderPool struct {
	Operation     string  `firestore:"operation"` // operation in flight
	OperationKind string  `firestore:"operationKind"`
	Intent        *Intent `firestore:"intent"`
	// Created is true once the provider has had the pool.
	Created bool `firestore:"created"`
	// NodeCount is the size per zone last set at the provider while
	// autoscaling was off, or -1 when unknown (the autoscaler moves it).
	NodeCount int `firestore:"nodeCount"`
}

// NodePoolDoc is the stored node pool.
type NodePoolDoc struct {
	resource.NodePool
	Active   bool         `firestore:"active"`
	Provider ProviderPool `firestore:"provider"`
	ExpireAt *time.Time   `firestore:"expireAt"`
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

func (s *Store) tenant(t string) *firestore.DocumentRef {
	return s.fs.Collection("tenants").Doc(t)
}

func (s *Store) memberRef(t, principal string) *firestore.DocumentRef {
	return s.tenant(t).Collection("members").Doc(principal)
}

// ClusterRef returns the document of a cluster.
func (s *Store) ClusterRef(t, clusterID string) *firestore.DocumentRef {
	return s.tenant(t).Collection("clusters").Doc(clusterID)
}

// NodePoolRef returns the document of a node pool.
func (s *Store) NodePoolRef(t, clusterID, nodePoolID string) *firestore.DocumentRef {
	return s.ClusterRef(t, clusterID).Collection("nodePools").Doc(nodePoolID)
}

func (s *Store) poolNameRef(t, clusterID, name string) *firestore.DocumentRef {
	return s.ClusterRef(t, clusterID).Collection("nodePoolNames").Doc(name)
}

func (s *Store) clusterNameRef(t, name string) *firestore.DocumentRef {
	return s.tenant(t).Collection("clusterNames").Doc(name)
}

func (s *Store) idempotencyRef(t, scope, caller, key string) *firestore.DocumentRef {
	h := sha256.Sum256([]byte(scope + "\x00" + caller + "\x00" + key))
	return s.tenant(t).Collection("idempotency").Doc(hex.EncodeToString(h[:]))
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

func newToken() string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b)
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

// notDeleted reports whether a state counts as existing for the API.
func notDeleted(st resource.State) bool { return st != resource.StateDeleted }
