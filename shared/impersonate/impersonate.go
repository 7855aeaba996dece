// Package impersonate gives the platform the identities it acts as in
// projects that are not the platform's: short-lived OAuth access tokens of
// a tenant's service account, minted through the IAM Credentials API
// (GenerateAccessToken) by the reconciler's own identity, which the tenant
// granted roles/iam.serviceAccountTokenCreator on that account. Tokens
// keeps each account's token until shortly before it expires, so that a
// run costs no IAM call while the token is fresh, and mints one token for
// any number of runs asking at once.
//
// Identity is the one way every call into a tenant's project gets its
// token: the clusters' GKE calls (CallOption) and Compute Engine reads
// (WithToken), and the substrates' calls to the cluster's Kubernetes API
// (TokenSource). When only the tenant can fix why there is none, the error
// is an *AccessError whose Guidance (Guidance, RolesRefused) says what to
// grant, the one text a cluster and its substrate show.
package impersonate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/iam/credentials/apiv1/credentialspb"
	"github.com/googleapis/gax-go/v2"
	"golang.org/x/oauth2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/utils/clock"
)

// Scope is the one OAuth scope the tokens carry: IAM decides what the
// account may do.
const Scope = "https://www.googleapis.com/auth/cloud-platform"

// TokenCreator is the role a tenant grants the reconciler on its service
// account.
const TokenCreator = "roles/iam.serviceAccountTokenCreator"

// Defaults of Tokens.
const (
	// DefaultLifetime is the tokens' lifetime: the longest the API gives
	// without an organization policy extending it.
	DefaultLifetime = time.Hour
	// DefaultMargin is how long before its expiry a token is replaced,
	// so that no call starts with a token about to expire.
	DefaultMargin = 5 * time.Minute
)

// Generator is the IAM Credentials call Tokens makes; the official client
// (cloud.google.com/go/iam/credentials/apiv1) has it.
type Generator interface {
	GenerateAccessToken(ctx context.Context, req *credentialspb.GenerateAccessTokenRequest, opts ...gax.CallOption) (*credentialspb.GenerateAccessTokenResponse, error)
}

// Tokens mints and caches access tokens of service accounts. It is safe
// for concurrent use.
type Tokens struct {
	gen      Generator
	now      func() time.Time
	lifetime time.Duration
	margin   time.Duration

	mu        sync.Mutex
	byAccount map[string]*entry
}

// entry is one account's token and the mint in flight, if any.
type entry struct {
	tok  *oauth2.Token
	mint *mint
}

// mint is one GenerateAccessToken, whose result every caller that waited
// for it shares.
type mint struct {
	done chan struct{}
	tok  *oauth2.Token
	err  error
}

// Option configures Tokens.
type Option func(*Tokens)

// WithClock sets the clock tokens expire by (for tests); nil means the
// real one.
func WithClock(c clock.PassiveClock) Option {
	return func(t *Tokens) {
		if c != nil {
			t.now = c.Now
		}
	}
}

// WithLifetime sets the lifetime asked for each token (DefaultLifetime
// otherwise), and margin how long before its expiry it is replaced
// (DefaultMargin otherwise). A short lifetime makes a revoked grant felt
// sooner: a token minted before the revoke stays valid until it expires.
func WithLifetime(lifetime, margin time.Duration) Option {
	return func(t *Tokens) { t.lifetime, t.margin = lifetime, margin }
}

// New returns Tokens minting through gen.
func New(gen Generator, opts ...Option) (*Tokens, error) {
	if gen == nil {
		return nil, errors.New("impersonate: New needs an IAM Credentials client")
	}
	t := &Tokens{gen: gen, now: time.Now, lifetime: DefaultLifetime, margin: DefaultMargin, byAccount: map[string]*entry{}}
	for _, o := range opts {
		o(t)
	}
	if t.lifetime < time.Second || t.lifetime > DefaultLifetime || t.margin < 0 || t.margin >= t.lifetime {
		return nil, fmt.Errorf("impersonate: lifetime %v and margin %v: want a lifetime of 1s to 1h and a margin below it", t.lifetime, t.margin)
	}
	return t, nil
}

// Token returns an access token of serviceAccount (an email) with at least
// the margin left before it expires: the cached one, or a new one. Callers
// asking at the same time share one GenerateAccessToken. An error of the
// API keeps its gRPC status (see Refused; Identity.Token turns it into an
// *AccessError).
func (t *Tokens) Token(ctx context.Context, serviceAccount string) (*oauth2.Token, error) {
	for {
		t.mu.Lock()
		e := t.byAccount[serviceAccount]
		if e == nil {
			e = &entry{}
			t.byAccount[serviceAccount] = e
		}
		if e.tok != nil && t.now().Before(e.tok.Expiry.Add(-t.margin)) {
			tok := e.tok
			t.mu.Unlock()
			return tok, nil
		}
		m, leader := e.mint, false
		if m == nil {
			m, leader = &mint{done: make(chan struct{})}, true
			e.mint = m
		}
		t.mu.Unlock()

		if leader {
			m.tok, m.err = t.generate(ctx, serviceAccount)
			t.mu.Lock()
			e.mint = nil
			if m.err == nil {
				e.tok = m.tok
			}
			t.mu.Unlock()
			close(m.done)
			return m.tok, m.err
		}
		select {
		case <-m.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("impersonate %s: %w", serviceAccount, ctx.Err())
		}
		if m.err != nil && ended(m.err) && ctx.Err() == nil {
			// The caller that minted gave up, not the API: mint again
			// for this one.
			continue
		}
		return m.tok, m.err
	}
}

func (t *Tokens) generate(ctx context.Context, serviceAccount string) (*oauth2.Token, error) {
	resp, err := t.gen.GenerateAccessToken(ctx, &credentialspb.GenerateAccessTokenRequest{
		Name:     "projects/-/serviceAccounts/" + serviceAccount,
		Scope:    []string{Scope},
		Lifetime: durationpb.New(t.lifetime),
	})
	if err != nil {
		return nil, fmt.Errorf("generate an access token of %s: %w", serviceAccount, err)
	}
	return &oauth2.Token{AccessToken: resp.GetAccessToken(), TokenType: "Bearer", Expiry: resp.GetExpireTime().AsTime()}, nil
}

// ended reports whether err is a context's end rather than the API's
// answer.
func ended(err error) bool {
	switch status.Code(err) {
	case codes.Canceled, codes.DeadlineExceeded:
		return true
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Refused reports whether err is the API refusing the impersonation: the
// caller lacks roles/iam.serviceAccountTokenCreator on the account, or the
// account does not exist (PERMISSION_DENIED, which the API answers for
// both, or NOT_FOUND). Only the account's owner can change that; any other
// error may pass by itself.
func Refused(err error) bool {
	switch status.Code(err) {
	case codes.PermissionDenied, codes.NotFound:
		return true
	}
	return false
}
