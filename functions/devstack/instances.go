package devstack

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/better-compute/kubernetes/functions/cloudrun"
	"github.com/better-compute/kubernetes/shared/apidoc"
	"github.com/better-compute/kubernetes/shared/chain"
	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
)

// With Config.Instances above 1 the devstack plays Cloud Run's shape
// (API.md §8): the functions run in that many separate processes of the
// deployed server (cloudrun.Main, what functions/cmd/server runs), each
// configured only through the environment Cloud Run would give it (PORT,
// K_SERVICE, K_REVISION, K_CONFIGURATION and the service's variables,
// cloudrun.LoadConfig's) and pointed at the stack's emulators, which all
// listen on TCP. The stack's address stays the one front end: the
// functions' paths are passed to the live instances in turn, as Cloud
// Run's front end spreads requests, and so reach them the Cloud Tasks
// emulator's dispatches (their URL is the stack's) and the watchdog's
// schedule (a POST of the watchdog function, as Cloud Scheduler makes).
// The stack's own routes (/dev/..., /healthz, the issuer) and the API's
// documents stay in the stack's process, which also builds the functions'
// parts for itself (Stack.Store and the others) but serves no function.
//
// A process that exits, even killed with SIGKILL, is started again after
// restartDelay on a new port, as Cloud Run starts a new instance;
// meanwhile requests go to the others, and wait up to instanceWait when
// none serves.
//
// The instances are processes of the devstack's own binary run with
// InstanceArg (Config.InstanceCommand): the binary carries the server's
// code whether it was built by go run, go install or go test, so nothing
// is built at start and a devstack installed outside the repository runs
// them as well.

// InstanceArg, as the first argument of the devstack command's binary,
// makes it run the deployed server (cloudrun.Main) instead of the
// devstack: the command line of each instance.
const InstanceArg = "functions-instance"

// InstancesPath lists the instances (API.md §8).
const InstancesPath = "/dev/instances"

const (
	// restartDelay is how long after an instance exits another is started
	// in its place.
	restartDelay = time.Second
	// instanceWait bounds how long a request waits for an instance when
	// none serves, as Cloud Run holds a request while it starts one.
	instanceWait = 10 * time.Second
	// instanceService names the instances' service (K_SERVICE).
	instanceService = "functions"
)

// Instance is one process serving the functions, as GET /dev/instances
// lists it.
type Instance struct {
	Index     int       `json:"index"`
	PID       int       `json:"pid"`
	Addr      string    `json:"addr"`
	StartedAt time.Time `json:"startedAt"`
	// Requests counts the requests the process answered.
	Requests int64 `json:"requests"`
}

// instance is a running process of the server.
type instance struct {
	index     int
	cmd       *exec.Cmd
	addr      string
	startedAt time.Time
	requests  atomic.Int64
	live      atomic.Bool   // it serves, and has not exited
	exited    chan struct{} // closed once it exited
	transport *http.Transport
}

func (in *instance) listed() Instance {
	return Instance{Index: in.index, PID: in.cmd.Process.Pid, Addr: in.addr, StartedAt: in.startedAt, Requests: in.requests.Load()}
}

// fleet runs and supervises the instances, and passes requests to them.
type fleet struct {
	s    *Stack
	argv []string
	env  []string // every instance's, but PORT
	out  io.Writer
	// paths maps the functions' paths on the stack to theirs on an
	// instance, where the Functions Framework serves each on /<name>.
	paths map[string]string

	outMu sync.Mutex // one line at a time on out

	mu      sync.Mutex
	procs   []*instance   // by index; nil while none runs
	changed chan struct{} // closed, and replaced, when an instance starts serving
	next    int           // the round robin's place

	stop func()
	wg   sync.WaitGroup
}

// functionsMux is the mux the stack's own routes join: the functions
// themselves when they run in this process, else the API's documents
// only (the front end passes the functions' paths to the instances).
func (s *Stack) functionsMux() *http.ServeMux {
	if s.cfg.Instances <= 1 {
		return s.app.Mux()
	}
	mux := http.NewServeMux()
	mux.Handle(apidoc.OpenAPIPath, apidoc.Handler())
	mux.Handle(apidoc.AsyncAPIPath, apidoc.Handler())
	return mux
}

// front is the handler of the stack's address: mux behind the edge, and
// with instances the functions' paths passed to them as they are (each
// request then passes the edge once, in the instance).
func (s *Stack) front(mux *http.ServeMux) http.Handler {
	mux.HandleFunc("GET "+InstancesPath, s.instancesHandler)
	edged := s.app.Edge(requireJSON(mux))
	paths := map[string]bool{}
	for _, f := range cloudrun.Functions() {
		paths[f.Path] = true
	}
	s.startedAt = time.Now()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !paths[r.URL.Path] {
			edged.ServeHTTP(w, r)
			return
		}
		if s.cfg.Instances > 1 {
			f := s.fleet.Load()
			if f == nil {
				httpapi.WriteError(r.Context(), w, errs.E(errs.Unavailable, "the instances are starting; retry"))
				return
			}
			f.ServeHTTP(w, r)
			return
		}
		s.served.Add(1)
		edged.ServeHTTP(w, r)
	})
}

// Instances returns the processes serving the functions: the instances
// running now, by index, or the stack's own process when it serves them
// itself (Config.Instances 1).
func (s *Stack) Instances() []Instance {
	f := s.fleet.Load()
	if f == nil {
		if s.cfg.Instances > 1 {
			return []Instance{}
		}
		return []Instance{{PID: os.Getpid(), Addr: s.lis.Addr().String(), StartedAt: s.startedAt, Requests: s.served.Load()}}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []Instance{}
	for _, in := range f.procs {
		if in != nil {
			out = append(out, in.listed())
		}
	}
	return out
}

// instancesHandler answers GET /dev/instances: {"instances": [...]}.
func (s *Stack) instancesHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	httpapi.WriteJSON(w, http.StatusOK, map[string][]Instance{"instances": s.Instances()})
}

// startInstances starts the instances, with Config.Instances above 1, and
// waits until each serves.
func (s *Stack) startInstances(ctx context.Context) error {
	if s.cfg.Instances <= 1 {
		return nil
	}
	if len(s.cfg.InstanceCommand) == 0 {
		return errors.New("-instances: no command runs an instance (Config.InstanceCommand)")
	}
	f := &fleet{s: s, argv: s.cfg.InstanceCommand, out: s.cfg.InstanceOutput, paths: map[string]string{},
		procs: make([]*instance, s.cfg.Instances), changed: make(chan struct{})}
	if f.out == nil {
		f.out = io.Discard
	}
	for _, fn := range cloudrun.Functions() {
		f.paths[fn.Path] = "/" + fn.Name
	}
	// The instances together spend the reconciler's share of the quota,
	// each leasing its part in batches sized by their count.
	c := s.functions
	c.ReconcileInstances = s.cfg.Instances
	f.env = append(instanceEnv(c),
		"K_SERVICE="+instanceService, "K_CONFIGURATION="+instanceService, "K_REVISION="+instanceService+"-00001-dev")
	bctx, stop := context.WithCancel(context.Background())
	f.stop = stop
	s.fleet.Store(f)
	for i := range s.cfg.Instances {
		f.wg.Add(1)
		go f.supervise(bctx, i)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Minute)
		defer cancel()
	}
	for {
		f.mu.Lock()
		serving, changed := 0, f.changed
		for _, in := range f.procs {
			if in != nil && in.live.Load() {
				serving++
			}
		}
		f.mu.Unlock()
		if serving == len(f.procs) {
			s.log.Info("Instances serving the functions", "instances", serving)
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("-instances: %d of %d instances serving: %w", serving, len(f.procs), ctx.Err())
		}
	}
}

// supervise runs instance i until ctx ends: started again restartDelay
// after each exit.
func (f *fleet) supervise(ctx context.Context, i int) {
	defer f.wg.Done()
	for ctx.Err() == nil {
		in, tail, err := f.startOne(ctx, i)
		if err == nil {
			<-in.exited
			in.live.Store(false)
			in.transport.CloseIdleConnections()
			f.mu.Lock()
			f.procs[i] = nil
			f.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
			f.s.log.Warn("Instance exited; another starts in its place", "index", i, "pid", in.cmd.Process.Pid,
				"status", in.cmd.ProcessState.String(), "lastOutput", tail.String())
		} else {
			f.s.log.Error("Instance did not start; trying again", "index", i, "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(restartDelay):
		}
	}
}

// startOne starts instance i on a free port and watches it: it is live
// once it answers HTTP, until it exits. tail keeps its last lines of
// output, for the log of its exit.
func (f *fleet) startOne(ctx context.Context, i int) (*instance, *lastLines, error) {
	port, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(f.argv[0], f.argv[1:]...)
	cmd.Env = append(append([]string(nil), f.env...), "PORT="+port)
	cmd.SysProcAttr = instanceAttrs()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", f.argv[0], err)
	}
	in := &instance{index: i, cmd: cmd, addr: "127.0.0.1:" + port, startedAt: time.Now(), exited: make(chan struct{}),
		// A connection per request: a request sent on a kept connection
		// of a process killed since could not be told from one the
		// process took, while a refused connection is surely safe to
		// send to another. No connection is kept idle (a negative
		// MaxIdleConnsPerHost), rather than keep-alives disabled, which
		// would send Connection: close: a Go server that answers such a
		// request before reading its body (401) resets the connection
		// at once, and the answer is lost under the body still being
		// sent, while otherwise it half-closes first and the answer
		// arrives.
		transport: &http.Transport{MaxIdleConnsPerHost: -1}}
	tail := &lastLines{}
	copied := make(chan struct{})
	go func() { f.copyOutput(out, i, tail); close(copied) }()
	go func() {
		// Wait closes the pipe: read it to its end first.
		<-copied
		_ = cmd.Wait()
		close(in.exited)
	}()
	f.mu.Lock()
	f.procs[i] = in
	f.mu.Unlock()
	go f.probe(ctx, in)
	return in, tail, nil
}

// probe marks in live once it answers HTTP (any answer: the Functions
// Framework serves only the functions' paths).
func (f *fleet) probe(ctx context.Context, in *instance) {
	c := &http.Client{Transport: in.transport, Timeout: time.Second}
	for {
		select {
		case <-in.exited:
			return
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
		resp, err := c.Get("http://" + in.addr + "/")
		if err != nil {
			continue
		}
		resp.Body.Close()
		in.live.Store(true)
		f.s.log.Info("Instance serving", "index", in.index, "pid", in.cmd.Process.Pid, "addr", in.addr)
		f.mu.Lock()
		close(f.changed)
		f.changed = make(chan struct{})
		f.mu.Unlock()
		return
	}
}

// copyOutput copies the output of instance i to the fleet's, line by
// line, leaving out the Functions Framework's list of what it serves and
// empty lines. A
// JSON record gets the instance's index ("instance"), so that the lines of
// all instances, interleaved, still say whose they are; a warning or an
// error of one goes to the console's log tap, as the stack's own do.
func (f *fleet) copyOutput(r io.Reader, i int, tail *lastLines) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	mark := []byte(fmt.Sprintf(`{"instance":%d,`, i))
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 || bytes.HasPrefix(line, []byte("Serving function: ")) {
			continue
		}
		tail.add(string(line))
		// The console shows the reasons of failing runs whichever
		// process logged them.
		f.s.logTap.NoteJSON(line)
		if bytes.HasPrefix(line, []byte("{\"")) {
			line = append(append([]byte(nil), mark...), line[1:]...)
		}
		f.outMu.Lock()
		_, _ = f.out.Write(append(line, '\n'))
		f.outMu.Unlock()
	}
}

// pick returns the next live instance in turn, waiting up to
// instanceWait for one; nil if none serves by then.
func (f *fleet) pick(ctx context.Context, skip map[*instance]bool) *instance {
	deadline := time.NewTimer(instanceWait)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		n := len(f.procs)
		for range n {
			in := f.procs[f.next%n]
			f.next++
			if in != nil && in.live.Load() && !skip[in] {
				f.mu.Unlock()
				return in
			}
		}
		changed := f.changed
		f.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		case <-deadline.C:
			return nil
		}
	}
}

// hopHeaders are not passed on by a proxy (RFC 9110 §7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// maxBody is the largest request body the front end passes on, as Cloud
// Run's front end allows (32 MiB over HTTP/1); a larger one is answered
// 413, before anything is read when its length is declared.
const maxBody = 32 << 20

// ServeHTTP passes a request of a function to the next live instance,
// its body streamed as it comes, not read first: the instance checks the
// token before it reads anything (401 whatever the size) and bounds what
// it reads (413 over the API's limit), exactly as the functions answer
// in the stack's own process. A connection that an instance refuses (it
// just died) is tried on another: nothing of the body has been read then.
// A request that an instance took and did not answer (killed under it) is
// answered 503 UNAVAILABLE, as Cloud Run answers when an instance fails
// mid-request: the client cannot know whether it took effect.
func (f *fleet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if r.ContentLength > maxBody {
		tooLarge(w)
		return
	}
	var body *forwarded
	if r.ContentLength != 0 {
		body = &forwarded{r: http.MaxBytesReader(w, r.Body, maxBody)}
	}
	path := f.paths[r.URL.Path]
	refused := map[*instance]bool{}
	for {
		in := f.pick(ctx, refused)
		if in == nil {
			httpapi.WriteError(ctx, w, errs.E(errs.Unavailable, "no instance serves the functions; retry"))
			return
		}
		url := "http://" + in.addr + path
		if r.URL.RawQuery != "" {
			url += "?" + r.URL.RawQuery
		}
		out, err := http.NewRequestWithContext(ctx, r.Method, url, nil)
		if err != nil {
			httpapi.WriteError(ctx, w, err)
			return
		}
		if body != nil {
			out.Body, out.ContentLength = body, r.ContentLength
		}
		out.Header = r.Header.Clone()
		for _, h := range hopHeaders {
			out.Header.Del(h)
		}
		resp, err := in.transport.RoundTrip(out)
		if err != nil {
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" && ctx.Err() == nil && !body.started() {
				refused[in] = true
				if len(refused) < len(f.procs) {
					continue
				}
				// Every instance refused: they are all dying or
				// starting.
				clear(refused)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if body.tooLarge() {
				tooLarge(w)
				return
			}
			f.s.log.Warn("Instance failed mid-request", "index", in.index, "path", r.URL.Path, "error", err)
			httpapi.WriteError(ctx, w, errs.Wrap(errs.Unavailable, err, "the instance serving the request stopped; retry"))
			return
		}
		for _, h := range hopHeaders {
			resp.Header.Del(h)
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		resp.Body.Close()
		in.requests.Add(1)
		return
	}
}

// tooLarge answers a body over maxBody: 413, in the API's envelope.
func tooLarge(w http.ResponseWriter) {
	httpapi.WriteJSON(w, http.StatusRequestEntityTooLarge, map[string]map[string]string{
		"error": {"code": errs.Invalid.Code(), "message": fmt.Sprintf("request body is larger than %d bytes", maxBody)},
	})
}

// forwarded is a request's body as the front end passes it on: read once,
// by the instance that took the connection. It records whether any of it
// was asked for, so that a request whose connection an instance refused
// goes to another as it stands, and it ignores the transport's Close (the
// server closes the request's body).
type forwarded struct {
	r       io.Reader
	read    atomic.Bool
	overMax atomic.Bool
}

func (b *forwarded) Read(p []byte) (int, error) {
	b.read.Store(true)
	n, err := b.r.Read(p)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		b.overMax.Store(true)
	}
	return n, err
}

func (b *forwarded) Close() error { return nil }

// started says whether anything was read of the body (none: nil).
func (b *forwarded) started() bool { return b != nil && b.read.Load() }

// tooLarge says whether the body ran over maxBody.
func (b *forwarded) tooLarge() bool { return b != nil && b.overMax.Load() }

// close ends every instance: SIGTERM, as Cloud Run stops one, then
// SIGKILL for those still running after grace.
func (f *fleet) close(grace time.Duration) error {
	f.stop()
	f.mu.Lock()
	procs := append([]*instance(nil), f.procs...)
	f.mu.Unlock()
	for _, in := range procs {
		if in != nil {
			_ = in.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	var cut []string
	for _, in := range procs {
		if in == nil {
			continue
		}
		select {
		case <-in.exited:
		case <-timer.C:
			timer.Reset(0)
		}
		select {
		case <-in.exited:
		default:
			cut = append(cut, strconv.Itoa(in.cmd.Process.Pid))
			_ = in.cmd.Process.Kill()
			<-in.exited
		}
	}
	f.wg.Wait()
	if len(cut) > 0 {
		return fmt.Errorf("instances %s still running %v after SIGTERM were killed", strings.Join(cut, ", "), grace)
	}
	return nil
}

// stopInstances ends the instances, if any.
func (s *Stack) stopInstances() error {
	f := s.fleet.Load()
	if f == nil {
		return nil
	}
	return f.close(closeGrace)
}

// tick runs a watchdog pass as Cloud Scheduler does: a POST of the
// watchdog function, through the front end (to an instance, with
// instances), with an OIDC token of the scheduler's identity, the one
// caller the function accepts.
func (s *Stack) tick(ctx context.Context) (chain.Pass, error) {
	var res chain.Pass
	tok, err := s.Issuer.ServiceAccountToken(s.functions.SchedulerServiceAccount, s.functions.ReconcileAudience, callerTokenLifetime)
	if err != nil {
		return res, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+functionPath(cloudrun.WatchdogFunction), nil)
	if err != nil {
		return res, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return res, fmt.Errorf("call the watchdog function: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return res, fmt.Errorf("the watchdog function answered %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return res, fmt.Errorf("the watchdog function's answer %q: %w", b, err)
	}
	return res, nil
}

// instanceEnv is the environment that configures a server as c does
// (the variables cloudrun.LoadConfig reads), but for PORT and Cloud Run's
// own.
func instanceEnv(c cloudrun.Config) []string {
	var env []string
	set := func(name, v string) {
		if v != "" {
			env = append(env, name+"="+v)
		}
	}
	dur := func(name string, d time.Duration) {
		if d > 0 {
			set(name, d.String())
		}
	}
	set("FUNCTION_TARGET", c.Function)
	set("GOOGLE_CLOUD_PROJECT", c.Project)
	set("FIRESTORE_DATABASE", c.FirestoreDatabase)
	set("AUTH_ISSUER_URL", c.AuthIssuerURL)
	set("AUTH_AUDIENCE", c.AuthAudience)
	set("TASKS_QUEUE", c.TasksQueue)
	set("TASKS_STEADY_QUEUE", c.TasksSteadyQueue)
	set("RECONCILE_URL", c.ReconcileURL)
	set("TASKS_SERVICE_ACCOUNT", c.TasksServiceAccount)
	set("TASKS_AUDIENCE", c.TasksAudience)
	set("RECONCILE_ISSUER_URL", c.ReconcileIssuerURL)
	set("RECONCILE_AUDIENCE", c.ReconcileAudience)
	set("SCHEDULER_SERVICE_ACCOUNT", c.SchedulerServiceAccount)
	set("PUSH_SERVICE_ACCOUNT", c.PushServiceAccount)
	set("PUSH_AUDIENCE", c.PushAudience)
	set("NODE_SERVICE_ACCOUNT", c.NodeServiceAccount)
	set("RECONCILER_SERVICE_ACCOUNT", c.ReconcilerServiceAccount)
	dur("IMPERSONATION_TOKEN_LIFETIME", c.ImpersonationTokenLifetime)
	set("BCD_IMAGE", c.BcdImage)
	set("SUBSTRATE_JOIN_URL", c.JoinURL)
	set("KUBERNETES_TOKEN", c.KubernetesToken)
	dur("CONVERGING_INTERVAL", c.ConvergingInterval)
	dur("STEADY_INTERVAL", c.SteadyInterval)
	dur("LEASE_TTL", c.LeaseTTL)
	dur("WATCHDOG_GRACE", c.WatchdogGrace)
	set("PROVIDER_QUOTA_PER_MINUTE", strconv.Itoa(c.ProviderQuota))
	set("PROVIDER_QUOTA_SHARE", strconv.FormatFloat(c.ProviderQuotaShare, 'g', -1, 64))
	set("RECONCILE_MAX_INSTANCES", strconv.Itoa(c.ReconcileInstances))
	set("LOG_LEVEL", c.LogLevel.String())
	set("TELEMETRY", c.Telemetry)
	set("FIRESTORE_EMULATOR_HOST", c.FirestoreEmulatorHost)
	set("PUBSUB_EMULATOR_HOST", c.PubSubEmulatorHost)
	set("CLOUD_TASKS_EMULATOR_HOST", c.TasksEmulatorHost)
	set("GKE_EMULATOR_HOST", c.GKEEmulatorHost)
	set("COMPUTE_EMULATOR_HOST", c.ComputeEmulatorHost)
	set("IAM_CREDENTIALS_EMULATOR_HOST", c.IAMCredentialsEmulatorHost)
	set("EMULATOR_ACCESS_TOKEN", c.EmulatorAccessToken)
	return env
}

// freePort returns a port free on 127.0.0.1 now.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port, nil
}

// lastLines keeps the last lines written to it.
type lastLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *lastLines) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
	if len(l.lines) > 5 {
		l.lines = l.lines[1:]
	}
}

func (l *lastLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
