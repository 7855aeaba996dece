package gke

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubeWait bounds how long a request waits for its cluster's API server to
// run (a slot of Kubernetes.MaxRunning, then the start): past it the
// request is answered 503 with Retry-After, which client-go retries by
// itself (ten times by default), while the start goes on. Long enough for
// a start on a quiet machine, short enough that no caller hangs.
const kubeWait = 10 * time.Second

// kubeRetryAfter is the Retry-After of those 503s, in seconds.
const kubeRetryAfter = 1

// evictAfter is how long a server must have served no request before a
// start beyond Kubernetes.MaxRunning may stop it: a client's calls come a
// few milliseconds apart, and stopping the server between them would
// make each of them pay a start. A started server's waiting caller,
// answered 503, comes back within kubeRetryAfter. Nor is a server stopped
// for another's start before it has run as long as its own start took:
// when many clusters take turns, at most half of a slot's time goes to
// starting servers, however slow the machine.
const evictAfter = 2 * time.Second

// serveFront serves the cluster's endpoint until it closes: TLS with a
// certificate of the cluster's CA, as the API server's own, and each
// request proxied to the API server, which the first one starts. Ending
// TLS here is what lets the simulator tell a request under way, which
// holds the server, from a keep-alive connection with none, which does
// not: the server can be stopped under an idle connection, and the
// connection's next request starts it again.
func (k *kubeCluster) serveFront() {
	defer k.env.wg.Done()
	certPEM, keyPEM, err := k.ca.ServingCert()
	var cert tls.Certificate
	if err == nil {
		cert, err = tls.X509KeyPair(certPEM, keyPEM)
	}
	if err != nil {
		k.log.Error("Cannot serve the cluster's endpoint: no serving certificate", "error", err)
		k.lis.Close()
		return
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
	srv := &http.Server{
		Handler:           http.HandlerFunc(k.serveHTTP),
		TLSConfig:         cfg,
		ReadHeaderTimeout: time.Minute,
		IdleTimeout:       5 * time.Minute,
		// Clients that go away mid-handshake are no news.
		ErrorLog: slog.NewLogLogger(k.env.log.Handler(), slog.LevelDebug),
	}
	_ = srv.Serve(tls.NewListener(upListener{k}, cfg))
}

// upListener is the cluster's endpoint, whose connections close at once
// until the control plane exists, as GKE's endpoint would refuse them, and
// are tracked so that close ends them.
type upListener struct{ k *kubeCluster }

func (l upListener) Accept() (net.Conn, error) {
	k := l.k
	for {
		conn, err := k.lis.Accept()
		if err != nil {
			return nil, err
		}
		g := k.g
		g.mu.Lock()
		g.settle()
		up := k.c != nil && k.up && !k.c.gone
		g.mu.Unlock()
		if !up || !k.track(conn) {
			conn.Close()
			continue
		}
		return &trackedConn{Conn: conn, k: k}, nil
	}
}

func (l upListener) Close() error   { return l.k.lis.Close() }
func (l upListener) Addr() net.Addr { return l.k.lis.Addr() }

// trackedConn untracks itself when it closes.
type trackedConn struct {
	net.Conn
	k *kubeCluster
}

func (c *trackedConn) Close() error {
	c.k.untrack(c.Conn)
	return c.Conn.Close()
}

// serveHTTP proxies one request to the API server: while it is under way
// (a watch as long as it lasts), the server is in use and is not stopped.
func (k *kubeCluster) serveHTTP(w http.ResponseWriter, r *http.Request) {
	k.use(1)
	defer k.use(-1)
	run, err := k.running(r.Context())
	if err != nil {
		if r.Context().Err() == nil {
			unavailable(w, err)
		}
		return
	}
	run.proxy.ServeHTTP(w, r)
}

// errKubeWait is a request's answer when its server does not run within
// kubeWait.
var errKubeWait = errors.New("the cluster's Kubernetes API server is starting")

// running returns the running server, starting it if need be, within
// kubeWait; the start goes on past it, for the caller's retry to find.
func (k *kubeCluster) running(ctx context.Context) (*serverRun, error) {
	type result struct {
		run *serverRun
		err error
	}
	got := make(chan result, 1)
	k.env.wg.Add(1)
	go func() {
		defer k.env.wg.Done()
		run, err := k.ensure()
		got <- result{run, err}
	}()
	t := time.NewTimer(kubeWait)
	defer t.Stop()
	select {
	case res := <-got:
		return res.run, res.err
	case <-t.C:
		return nil, errKubeWait
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// unavailable answers 503 with Retry-After, as the API server does while
// it cannot serve, so that clients retry.
func unavailable(w http.ResponseWriter, err error) {
	body, _ := json.Marshal(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  fmt.Sprintf("%v; retry", err),
		Reason:   metav1.StatusReasonServiceUnavailable,
		Code:     http.StatusServiceUnavailable,
		Details:  &metav1.StatusDetails{RetryAfterSeconds: kubeRetryAfter},
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", strconv.Itoa(kubeRetryAfter))
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
}

// newServerRun makes the run of a server started at endpoint: its proxy,
// over a transport of its own whose connections end with it.
func (k *kubeCluster) newServerRun(endpoint string) (*serverRun, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(k.ca.CertPEM) {
		return nil, errors.New("the cluster's CA certificate does not parse")
	}
	backend := &url.URL{Scheme: "https", Host: endpoint}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     time.Minute,
	}
	p := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(backend) },
		Transport:     tr,
		FlushInterval: -1, // watches stream
		ErrorLog:      slog.NewLogLogger(k.env.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return
			}
			// The server stopped or crashed under the request: the next
			// try starts it again.
			k.log.Debug("A request to the cluster's Kubernetes API server failed; answered 503", "error", err)
			unavailable(w, fmt.Errorf("the cluster's Kubernetes API server went away: %w", err))
		},
	}
	return &serverRun{loopDone: make(chan struct{}), proxy: p, transport: tr}, nil
}

// acquire takes a slot of the running servers for k, first come first
// served: a free one, or that of the least recently used server that
// lruUnheld finds stoppable, which it stops.
// Failing both, it waits, however long it takes: a request under way (a
// watch) is never cut, and the caller meanwhile is answered 503 after
// kubeWait and retries.
func (e *kubeEnv) acquire(k *kubeCluster) error {
	e.mu.Lock()
	if e.cfg.MaxRunning < 0 {
		e.take()
		e.mu.Unlock()
		return nil
	}
	e.queue = append(e.queue, k)
	e.mu.Unlock()
	defer e.dequeue(k)

	// Servers become stoppable as time passes, with nothing to wake on.
	tick := time.NewTicker(evictAfter / 4)
	defer tick.Stop()
	var waitSince time.Time
	for {
		e.mu.Lock()
		pos := e.position(k)
		if pos == 0 && e.running < e.cfg.MaxRunning {
			e.take()
			e.mu.Unlock()
			if !waitSince.IsZero() {
				k.log.Info("The start of the cluster's Kubernetes API server goes on", "waited", time.Since(waitSince).Round(time.Millisecond))
			}
			return nil
		}
		var lru *kubeCluster
		if pos == 0 {
			lru = e.lruUnheld(k, time.Now().Add(-evictAfter))
		}
		freed, running := e.freed, e.running
		e.mu.Unlock()
		if lru != nil {
			// It may have come into use meanwhile: then look again.
			lru.stopUnused(time.Now().Add(-evictAfter), fmt.Sprintf("%d API servers run, the bound (Kubernetes.MaxRunning), and a start waits; this one was the least recently used", e.cfg.MaxRunning))
			continue
		}
		if waitSince.IsZero() {
			waitSince = time.Now()
			why := fmt.Sprintf("%d starts are ahead of this one", pos)
			if pos == 0 {
				why = fmt.Sprintf("each of the %d running API servers (Kubernetes.MaxRunning) serves a request, served one in the last %v or has run less long than its start took", running, evictAfter)
			}
			k.log.Info("The start of the cluster's Kubernetes API server waits for a slot; its callers are answered 503 with Retry-After meanwhile",
				"reason", why, "maxRunning", e.cfg.MaxRunning)
		}
		select {
		case <-freed:
		case <-tick.C:
		case <-k.ctx.Done():
			return errKubeClosed
		}
	}
}

// take takes a slot. Must be called with e.mu held.
func (e *kubeEnv) take() {
	e.running++
	e.peak = max(e.peak, e.running)
}

// position is k's place in the queue of starts, -1 when it is not in it.
// Must be called with e.mu held.
func (e *kubeEnv) position(k *kubeCluster) int {
	for i, q := range e.queue {
		if q == k {
			return i
		}
	}
	return -1
}

// dequeue takes k out of the queue of starts and wakes the next.
func (e *kubeEnv) dequeue(k *kubeCluster) {
	e.mu.Lock()
	if i := e.position(k); i >= 0 {
		e.queue = append(e.queue[:i], e.queue[i+1:]...)
	}
	e.mu.Unlock()
	e.wake()
}

// release gives back a slot that acquire took.
func (e *kubeEnv) release() {
	e.mu.Lock()
	e.running--
	e.mu.Unlock()
	e.wake()
}

// lruUnheld is the least recently used running server, other than except,
// that serves no request, was last used before cutoff and has run as long
// as its start took; nil when there is none. Must be called with e.mu
// held.
func (e *kubeEnv) lruUnheld(except *kubeCluster, cutoff time.Time) *kubeCluster {
	var lru *kubeCluster
	var lruAt time.Time
	for o := range e.all {
		if o == except {
			continue
		}
		o.mu.Lock()
		paid := time.Since(o.startedAt) >= o.startTook
		if o.run != nil && o.busy == nil && o.active == 0 && paid && o.lastUsed.Before(cutoff) && (lru == nil || o.lastUsed.Before(lruAt)) {
			lru, lruAt = o, o.lastUsed
		}
		o.mu.Unlock()
	}
	return lru
}

// wake wakes the starts that wait for a slot, to look again.
func (e *kubeEnv) wake() {
	e.mu.Lock()
	defer e.mu.Unlock()
	close(e.freed)
	e.freed = make(chan struct{})
}
