package iamcredentials

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/iam/credentials/apiv1/credentialspb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	"github.com/better-compute/kubernetes/emulators/faults"
)

// TokenCreator is the role that lets a principal mint tokens of a service
// account.
const TokenCreator = "roles/iam.serviceAccountTokenCreator"

// Option configures a Server.
type Option func(*config)

type config struct {
	addr string
	now  func() time.Time
	log  *slog.Logger
}

// WithAddr makes the server listen on addr (host:port) instead of
// 127.0.0.1:0.
func WithAddr(addr string) Option { return func(c *config) { c.addr = addr } }

// WithClock sets the clock tokens expire by (nil: the real one), which
// must be safe for concurrent use.
func WithClock(c clock.PassiveClock) Option {
	return func(cfg *config) {
		if c != nil {
			cfg.now = c.Now
		}
	}
}

// WithLogger sends the server's logs to l (discarded otherwise).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// Server is an in-process IAM Credentials emulator serving
// google.iam.credentials.v1.IAMCredentials over gRPC. Its methods other
// than the RPCs grant, revoke, issue and inspect for tests; all are safe
// for concurrent use.
type Server struct {
	// GServer implements the RPCs; tests normally use Server's helpers.
	GServer *GServer
	// Injector fails, delays and counts the calls of every RPC, before
	// anything is checked (package faults): its FailNext, SetLatency,
	// AddReactor and Calls are the Server's.
	*faults.Injector
	srv *grpc.Server
	lis net.Listener
}

// GServer implements credentialspb.IAMCredentialsServer.
type GServer struct {
	credentialspb.UnimplementedIAMCredentialsServer

	now func() time.Time
	log *slog.Logger

	mu     sync.Mutex
	grants map[string]map[string]bool // service account → principals with TokenCreator
	tokens map[string]token           // by access token
}

var _ credentialspb.IAMCredentialsServer = (*GServer)(nil)

// token is an access token the emulator issued.
type token struct {
	principal string
	expiry    time.Time
}

// NewServer starts an emulator listening on 127.0.0.1:0 (or WithAddr).
// Close it when done.
func NewServer(opts ...Option) (*Server, error) {
	cfg := config{addr: "127.0.0.1:0", now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	g := &GServer{
		now:    cfg.now,
		log:    cfg.log,
		grants: map[string]map[string]bool{},
		tokens: map[string]token{},
	}
	lis, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("iam credentials emulator: listen on %s: %w", cfg.addr, err)
	}
	inj := &faults.Injector{}
	srv := grpc.NewServer(grpc.UnaryInterceptor(inj.UnaryInterceptor))
	credentialspb.RegisterIAMCredentialsServer(srv, g)
	inj.SetMethods(faults.MethodsOf(srv))
	go func() {
		if err := srv.Serve(lis); err != nil {
			g.log.Warn("IAM Credentials emulator stopped serving", "err", err)
		}
	}()
	g.log.Info("IAM Credentials emulator listening", "addr", lis.Addr().String())
	return &Server{GServer: g, Injector: inj, srv: srv, lis: lis}, nil
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Close stops the server at once, failing calls in flight.
func (s *Server) Close() error {
	s.srv.Stop()
	return nil
}

// ClientOptions returns the options that point the official client at
// this server over an insecure connection, presenting bearer (a token
// from IssueToken or GenerateAccessToken; none when empty) as the
// caller's credential on every call:
//
//	client, err := credentials.NewIamCredentialsClient(ctx, srv.ClientOptions(tok)...)
func (s *Server) ClientOptions(bearer string) []option.ClientOption {
	opts := []option.ClientOption{
		option.WithEndpoint(s.Addr()),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
	if bearer != "" {
		opts = append(opts, option.WithGRPCDialOption(grpc.WithPerRPCCredentials(Bearer(bearer))))
	}
	return opts
}

// Bearer is an access token presented as "authorization: Bearer <token>"
// on every call of a gRPC connection, including one without TLS (an
// emulator's: the real services need TLS, and Google's clients bring their
// own credentials for them).
type Bearer string

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b Bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: an
// emulator's connection has none.
func (Bearer) RequireTransportSecurity() bool { return false }

// Grant gives principal (an email) roles/iam.serviceAccountTokenCreator
// on serviceAccount: from now on, principal may mint its tokens.
func (s *Server) Grant(serviceAccount, principal string) {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.grants[serviceAccount] == nil {
		g.grants[serviceAccount] = map[string]bool{}
	}
	g.grants[serviceAccount][principal] = true
}

// Revoke takes the role back: principal's next GenerateAccessToken for
// serviceAccount is PERMISSION_DENIED. Tokens already minted stay valid
// until they expire, as in the real service.
func (s *Server) Revoke(serviceAccount, principal string) {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.grants[serviceAccount], principal)
}

// IssueToken returns a new access token of principal valid for lifetime:
// the token a workload running as principal gets from its default
// credentials, here for the emulators that check callers.
func (s *Server) IssueToken(principal string, lifetime time.Duration) string {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	tok, _ := g.issue(principal, lifetime)
	return tok
}

// Identify returns the principal a token stands for, and false when the
// emulator did not issue it or it expired: what another emulator asks to
// authenticate a call.
func (s *Server) Identify(accessToken string) (string, bool) {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.identify(accessToken)
}

// issue mints a token of principal. Expired tokens are dropped on the
// way, so that the table holds only live ones. Must be called with the
// lock held.
func (g *GServer) issue(principal string, lifetime time.Duration) (string, time.Time) {
	now := g.now()
	for k, t := range g.tokens {
		if !now.Before(t.expiry) {
			delete(g.tokens, k)
		}
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	tok := "ya29.emu." + base64.RawURLEncoding.EncodeToString(b)
	exp := now.Add(lifetime)
	g.tokens[tok] = token{principal: principal, expiry: exp}
	return tok, exp
}

// identify returns the principal of a live token. Must be called with the
// lock held.
func (g *GServer) identify(accessToken string) (string, bool) {
	t, ok := g.tokens[accessToken]
	if !ok || !g.now().Before(t.expiry) {
		return "", false
	}
	return t.principal, true
}

// Messages of Google's front end for calls it cannot authenticate.
const (
	missingCredential = "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
	invalidCredential = "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
)

// bearerToken returns the access token of a call's "authorization:
// Bearer" header, or "" when it has none.
func bearerToken(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if scheme, tok, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "bearer") && tok != "" {
			return strings.TrimSpace(tok)
		}
	}
	return ""
}

// caller authenticates a call. Must be called with the lock held.
func (g *GServer) caller(ctx context.Context) (string, error) {
	tok := bearerToken(ctx)
	if tok == "" {
		return "", status.Error(codes.Unauthenticated, missingCredential)
	}
	p, ok := g.identify(tok)
	if !ok {
		return "", status.Error(codes.Unauthenticated, invalidCredential)
	}
	return p, nil
}
