// Package kubeapply writes a pool substrate's objects into a GKE cluster's
// Kubernetes API and reads its Nodes (API.md §9).
//
// A substrate's objects are the Namespace better-compute-system, and in it
// the ServiceAccount bcd, the Secret bcd-join holding the join token and the
// DaemonSet bcd that runs the join daemon on the substrate's node pools. They
// are written by server-side apply under one field manager and all carry
// the label better-compute.dev/substrate-pool, whose value is the pool ID
// or, when that is not a label value, one derived from it (PoolLabel), and
// the annotation better-compute.dev/substrate-pool-id holding the whole ID.
// They are the only proof that an object is the pool's: an object of one of
// these names without the label, or with another pool's value or ID, is
// never patched, adopted or deleted.
//
// The package holds no state between calls and decides nothing about when to
// apply or remove: the reconciler does, and calls Apply and Remove as often
// as it likes (both are safe to run twice).
package kubeapply

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// The names every substrate uses. They are fixed, not per pool, so that a
// cluster holds at most one substrate's objects: a second pool adopting the
// same cluster finds them labelled with the first pool and is refused.
const (
	// LabelPool marks an object as a substrate's; its value is
	// PoolLabel of the pool ID.
	LabelPool = "better-compute.dev/substrate-pool"
	// LabelNodePool is the label GKE puts on every Node with the name of
	// its node pool.
	LabelNodePool = "cloud.google.com/gke-nodepool"
	// LabelZone is the well-known label holding a Node's zone.
	LabelZone = "topology.kubernetes.io/zone"

	Namespace          = "better-compute-system"
	ServiceAccountName = "bcd"
	SecretName         = "bcd-join"
	DaemonSetName      = "bcd"
	ContainerName      = "bcd"
	// SecretKey is the key of the join token in the Secret's data.
	SecretKey = "token"

	// FieldManager is the server-side apply field manager of every write.
	FieldManager = "better-compute-substrates"
)

// Client settings. A reconciler run makes a handful of calls per substrate,
// and listing a big substrate's Nodes a few more; these leave room for
// several runs at once against one cluster without crowding its API server
// (controller-runtime's defaults are the same).
const (
	requestTimeout = 30 * time.Second
	defaultQPS     = 20
	defaultBurst   = 30
	userAgent      = "better-compute-substrates"
)

// Target says how to reach one cluster's Kubernetes API.
type Target struct {
	// Endpoint is the API server's host or host:port, as GKE reports it
	// (no scheme: the connection is always https).
	Endpoint string
	// CAPEM is the PEM of the CA that signed the API server's certificate
	// (GKE reports it base64-encoded: decode it first). Required: the
	// connection is never made without verifying the server.
	CAPEM []byte
	// Token gives the bearer token sent with each request, asked once per
	// request: caching is the source's business (Google's token sources
	// cache until expiry). It is a Google OAuth token, which GKE
	// accepts: the reconciler's own for a cluster in the platform's
	// projects, the impersonated tenant account's for one in a tenant's
	// project (an error of the source fails the request, wrapped); in
	// tests a static one.
	Token oauth2.TokenSource
}

// Cluster is a connection to one cluster's Kubernetes API. It is safe for
// concurrent use.
type Cluster struct {
	client   kubernetes.Interface
	pageSize int64 // Nodes per page when listing; tests make it small
}

// Connect builds a client for the target. It makes no request: a cluster
// that cannot be reached shows up as an error of the first call.
func Connect(t Target) (*Cluster, error) {
	return connect(t, defaultQPS, defaultBurst)
}

// connect is Connect with the client's rate limits: tests, alone with their
// API server, lift them.
func connect(t Target, qps float32, burst int) (*Cluster, error) {
	if t.Endpoint == "" {
		return nil, errors.New("connect: empty endpoint")
	}
	if strings.Contains(t.Endpoint, "/") {
		return nil, fmt.Errorf("connect: endpoint %q: want host or host:port, without scheme or path", t.Endpoint)
	}
	if t.Token == nil {
		return nil, fmt.Errorf("connect %s: no token source", t.Endpoint)
	}
	// client-go would take a CA with no certificate in it and then fail
	// every request with an unknown-authority error; say it here instead.
	if !x509.NewCertPool().AppendCertsFromPEM(t.CAPEM) {
		return nil, fmt.Errorf("connect %s: CA holds no PEM certificate", t.Endpoint)
	}
	cfg := &rest.Config{
		Host:            "https://" + t.Endpoint,
		TLSClientConfig: rest.TLSClientConfig{CAData: t.CAPEM},
		WrapTransport:   transport.TokenSourceWrapTransport(t.Token),
		Timeout:         requestTimeout,
		QPS:             qps,
		Burst:           burst,
		UserAgent:       userAgent,
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", t.Endpoint, err)
	}
	return &Cluster{client: cs, pageSize: nodesPageSize}, nil
}
