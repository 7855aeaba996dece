package kubesim

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// DefaultReadyTimeout is how long StartAPIServer waits for /readyz unless
// Options.ReadyTimeout says otherwise. The server is ready in about two
// seconds on an idle machine; a busy one (a build beside it) takes longer.
const DefaultReadyTimeout = 90 * time.Second

// AdminUser is the user of APIServer.AdminToken, in group system:masters,
// which RBAC lets do anything.
const AdminUser = "admin"

// Token is a static bearer token the API server accepts, and who presents
// it.
type Token struct {
	Value  string
	User   string
	Groups []string
}

// Options configure StartAPIServer.
type Options struct {
	// Dir keeps the server's state: etcd's data, its certificates and
	// keys, its admin token and its log (kube-apiserver.log). A server
	// started again on the same Dir has the same objects, CA and admin
	// token. Empty: a temporary directory that Stop removes.
	Dir string
	// Tokens are accepted besides the admin token.
	Tokens []Token
	// CA signs the serving certificate. Nil: the CA of an earlier start
	// on Dir, or a new one, kept in Dir.
	CA *CA
	// AdminToken is the admin's token. Empty: that of an earlier start on
	// Dir, or a new random one, kept in Dir.
	AdminToken string
	// ReadyTimeout bounds the wait for /readyz (DefaultReadyTimeout when
	// zero).
	ReadyTimeout time.Duration
	// Log receives what the server's start and stop do (discarded when
	// nil); the server's own log goes to Dir/kube-apiserver.log.
	Log *slog.Logger
	// Webhook, when set, authenticates the bearer tokens that are not
	// the server's own, and authorizes what RBAC does not allow.
	Webhook *Webhook
}

// APIServer is a running kube-apiserver with its etcd: one process,
// listening on 127.0.0.1, serving TLS with a certificate for 127.0.0.1 and
// localhost signed by CAPEM, authenticating static bearer tokens (and
// Options.Webhook's) and authorizing with RBAC (and the webhook). Nothing else runs: no controllers, no scheduler,
// no kubelet.
type APIServer struct {
	// Endpoint is host:port, on 127.0.0.1.
	Endpoint string
	// CAPEM is the CA that signed the serving certificate.
	CAPEM []byte
	// AdminToken is the token of user admin, group system:masters.
	AdminToken string
	// Dir is Options.Dir, or the temporary directory Stop removes.
	Dir string

	log       *slog.Logger
	cmd       *exec.Cmd
	exited    chan struct{}
	exitErr   error
	stderr    *tailBuffer
	logFile   *os.File
	removeDir bool
	stopOnce  sync.Once
	stopErr   error
}

// StartAPIServer starts binary (see Binary) on a free port of 127.0.0.1
// and returns once the server answers /readyz. ctx bounds the start only:
// the server runs until Stop. On failure nothing is left running, and the
// error ends with the tail of the server's log.
func StartAPIServer(ctx context.Context, binary string, opts Options) (_ *APIServer, err error) {
	log := orDiscard(opts.Log)
	s := &APIServer{Dir: opts.Dir, log: log}
	if s.Dir == "" {
		if s.Dir, err = os.MkdirTemp("", "kube-apiserver-"); err != nil {
			return nil, fmt.Errorf("kubesim: %w", err)
		}
		s.removeDir = true
		defer func() {
			if err != nil {
				os.RemoveAll(s.Dir)
			}
		}()
	}
	args, err := s.prepare(opts)
	if err != nil {
		return nil, err
	}
	timeout := opts.ReadyTimeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The port is free when chosen but may be taken before the server
	// binds it: try another.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		err = s.start(ctx, binary, port, args)
		if err == nil {
			log.Info("Kubernetes API server ready", "endpoint", s.Endpoint, "dir", s.Dir, "pid", s.cmd.Process.Pid)
			return s, nil
		}
		if attempt < 3 && strings.Contains(s.stderr.String(), "address already in use") {
			log.Warn("Kubernetes API server's port was taken; retrying on another", "port", port)
			continue
		}
		return nil, err
	}
}

// prepare writes the server's files in Dir and returns the arguments
// that name them.
func (s *APIServer) prepare(opts Options) ([]string, error) {
	for _, d := range []string{s.Dir, filepath.Join(s.Dir, "etcd"), filepath.Join(s.Dir, "certs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("kubesim: %w", err)
		}
	}
	file := func(name string) string { return filepath.Join(s.Dir, name) }
	ca, err := loadCA(opts.CA, file("ca.crt"), file("ca.key"))
	if err != nil {
		return nil, err
	}
	s.CAPEM = ca.CertPEM
	cert, key, err := servingCert(ca)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(writeFile(file("serving.crt"), cert), writeFile(file("serving.key"), key)); err != nil {
		return nil, err
	}
	if err := serviceAccountKey(file("sa.key")); err != nil {
		return nil, err
	}
	if s.AdminToken, err = loadToken(opts.AdminToken, file("admin.token")); err != nil {
		return nil, err
	}
	tokens := append([]Token{{Value: s.AdminToken, User: AdminUser, Groups: []string{"system:masters"}}}, opts.Tokens...)
	csv, err := tokenFile(tokens)
	if err != nil {
		return nil, err
	}
	if err := writeFile(file("tokens.csv"), csv); err != nil {
		return nil, err
	}
	args := []string{
		"--embedded-etcd-dir=" + file("etcd"),
		"--bind-address=127.0.0.1",
		// Without it the server looks for an interface with a default
		// route, which a sandbox may not have.
		"--advertise-address=127.0.0.1",
		// The endpoints of the default/kubernetes Service would name the
		// advertised address, which may not be a loopback one; nothing
		// in the cluster needs them.
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + file("certs"),
		"--tls-cert-file=" + file("serving.crt"),
		"--tls-private-key-file=" + file("serving.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + file("sa.key"),
		"--service-account-signing-key-file=" + file("sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		"--token-auth-file=" + file("tokens.csv"),
		// Flow control keeps a dozen goroutines and objects busy for
		// nothing here, on machines that run many of these servers.
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}
	if opts.Webhook == nil {
		return append(args, "--authorization-mode=RBAC"), nil
	}
	wargs, err := webhookArgs(opts.Webhook, s.Dir)
	if err != nil {
		return nil, err
	}
	return append(args, wargs...), nil
}

// loadCA returns ca if set, else the CA kept in certPath and keyPath, else
// a new one, which it keeps there.
func loadCA(ca *CA, certPath, keyPath string) (CA, error) {
	if ca == nil {
		certPEM, err1 := os.ReadFile(certPath)
		keyPEM, err2 := os.ReadFile(keyPath)
		if err1 == nil && err2 == nil {
			return CA{CertPEM: certPEM, KeyPEM: keyPEM}, nil
		}
		c, err := NewCA("kubesim-ca")
		if err != nil {
			return CA{}, err
		}
		ca = &c
	}
	if _, _, err := ca.parse(); err != nil {
		return CA{}, err
	}
	return *ca, errors.Join(writeFile(certPath, ca.CertPEM), writeFile(keyPath, ca.KeyPEM))
}

// loadToken returns tok if set, else the token kept in path, else a new
// random one, which it keeps there.
func loadToken(tok, path string) (string, error) {
	if tok == "" {
		if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
			return string(bytes.TrimSpace(b)), nil
		}
		tok = RandomToken()
	}
	return tok, writeFile(path, []byte(tok))
}

// RandomToken returns a new bearer token of 256 random bits.
func RandomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tokenFile is the --token-auth-file: token,user,uid,"group1,group2".
func tokenFile(tokens []Token) ([]byte, error) {
	var b bytes.Buffer
	for _, t := range tokens {
		for _, f := range append([]string{t.Value, t.User}, t.Groups...) {
			if f == "" || strings.ContainsAny(f, ",\"\n\r") {
				return nil, fmt.Errorf("kubesim: token of user %q: a token, user or group must not be empty or hold a comma, quote or newline", t.User)
			}
		}
		fmt.Fprintf(&b, "%s,%s,%s", t.Value, t.User, t.User)
		if len(t.Groups) > 0 {
			fmt.Fprintf(&b, ",%q", strings.Join(t.Groups, ","))
		}
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("kubesim: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the binary on port and waits for /readyz until ctx ends; on
// failure it kills the process.
func (s *APIServer) start(ctx context.Context, binary string, port int, args []string) error {
	logFile, err := os.OpenFile(filepath.Join(s.Dir, "kube-apiserver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("kubesim: %w", err)
	}
	s.Endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.stderr = &tailBuffer{}
	s.logFile = logFile
	s.exited = make(chan struct{})
	s.cmd = exec.Command(binary, append(args, "--secure-port="+strconv.Itoa(port))...)
	s.cmd.Stdout = logFile
	s.cmd.Stderr = io.MultiWriter(logFile, s.stderr)
	setGroup(s.cmd)
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("kubesim: start %s: %w", binary, err)
	}
	go func() {
		s.exitErr = s.cmd.Wait()
		logFile.Close()
		close(s.exited)
	}()
	if err := s.waitReady(ctx); err != nil {
		s.kill()
		return fmt.Errorf("kubesim: API server on %s: %w; its log ends:\n%s", s.Endpoint, err, s.stderr.String())
	}
	return nil
}

// waitReady polls /readyz until it answers 200, the process exits or ctx
// ends.
func (s *APIServer) waitReady(ctx context.Context) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CAPEM)
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		Timeout:   5 * time.Second,
	}
	defer client.CloseIdleConnections()
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+s.Endpoint+"/readyz", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+s.AdminToken)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("/readyz answered %d: %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		select {
		case <-s.exited:
			return fmt.Errorf("exited before it was ready: %v", s.exitErr)
		case <-ctx.Done():
			return fmt.Errorf("not ready (%s): %w", last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *APIServer) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// Stop kills the server and waits for it to exit; with no Options.Dir, it
// removes the temporary directory. etcd's data survive a kill (its write-
// ahead log), so a server started again on the same Dir finds its objects.
// Later calls return the first one's result.
func (s *APIServer) Stop() error {
	s.stopOnce.Do(func() {
		select {
		case <-s.exited:
			s.stopErr = fmt.Errorf("kubesim: API server on %s had exited: %v; its log ends:\n%s", s.Endpoint, s.exitErr, s.stderr.String())
		default:
			s.kill()
		}
		if s.removeDir {
			if err := os.RemoveAll(s.Dir); err != nil {
				s.stopErr = errors.Join(s.stopErr, fmt.Errorf("kubesim: %w", err))
			}
		}
		s.log.Info("Kubernetes API server stopped", "endpoint", s.Endpoint)
	})
	return s.stopErr
}

// Exited is closed when the server's process has exited, whether Stop
// killed it or it failed.
func (s *APIServer) Exited() <-chan struct{} { return s.exited }

// RESTConfig returns a client-go configuration for the server with token
// (the admin token when empty).
func (s *APIServer) RESTConfig(token string) *rest.Config {
	if token == "" {
		token = s.AdminToken
	}
	return RESTConfig(s.Endpoint, s.CAPEM, token)
}

// RESTConfig returns a client-go configuration for the API server at
// endpoint (host:port) that trusts caPEM and presents token. Its rate
// limit is well above client-go's default (5 per second), which would
// make a test or a simulator with many objects wait for nothing.
func RESTConfig(endpoint string, caPEM []byte, token string) *rest.Config {
	return &rest.Config{
		Host:            "https://" + endpoint,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), caPEM...)},
		QPS:             200,
		Burst:           400,
	}
}
