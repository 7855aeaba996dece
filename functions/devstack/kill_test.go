package devstack_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	container "cloud.google.com/go/container/apiv1"
	"cloud.google.com/go/container/apiv1/containerpb"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	iamemu "github.com/better-compute/kubernetes/emulators/iamcredentials"
	"github.com/better-compute/kubernetes/functions/devstack"
	apiclient "github.com/better-compute/kubernetes/shared/client"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/wait"
)

// childEnv makes the test binary run the devstack command with its
// arguments instead of the tests: TestKillAndRestart kills real processes.
const childEnv = "DEVSTACK_TEST_CHILD"

func devstackChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := devstack.Command(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "devstack:", err)
		return 1
	}
	return 0
}

// killWait bounds TestKillAndRestart's waits for a process: as long as
// wait.For's, since a restart, and the leases a killed run held, come on
// top of a loaded machine's slowness.
const killWait = wait.Timeout

// lossWindow bounds how long before a kill a change may be lost with it:
// the save interval (a second) and the time a save takes, with room for
// a machine loaded by other tests.
const lossWindow = 3 * time.Second

// TestKillAndRestart runs the devstack command as a process with a data
// file, drives a sequence of cluster and node pool creates, resizes and
// deletes over HTTP, kills the process with SIGKILL at random points
// (KILL_SEED repeats a run), restarts it with the same flags and goes on
// with the token of the first process. A change a kill lost (at most the
// last second's) is made again. At the end every cluster and node pool
// has converged, in the API and at the GKE simulator, and a subscriber
// that pulled from the start has every event of every pool and cluster.
func TestKillAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts processes")
	}
	rng := seededRand(t, "KILL_SEED")
	begin := time.Now()

	dir := t.TempDir()
	data := filepath.Join(dir, "data.json")
	// Every process of the run listens on the same addresses, chosen
	// free here. Between the choice and the first process's bind, another
	// socket of the machine may take one (a client's ephemeral port, with
	// CI's other tests running): the first start then chooses again.
	var p *process
	var ps string // the Pub/Sub emulator's, which the test's consumer reads
	for attempt := 1; ; attempt++ {
		var api, fs string
		api, ps, fs = freeAddr(t), freeAddr(t), freeAddr(t)
		p = &process{t: t, dir: dir, url: "http://" + api, args: []string{
			"-addr", api, "-pubsub-addr", ps, "-firestore-addr", fs, "-data", data,
			"-seed", "../../emulators/seed/devstack.json",
			// Operations outlast a save interval, so that the data file often
			// holds some running.
			"-gke-operation-time", "1s", "-converging-interval", "300ms", "-steady-interval", "1s",
			"-lease-ttl", "1s", "-watchdog-interval", "500ms",
		}}
		t.Cleanup(p.cleanup)
		if p.startOn() || attempt == 3 {
			break
		}
		t.Logf("an address chosen for devstack %d was taken before it listened; choosing others", p.n)
	}

	k := &killTest{t: t, p: p, clusters: map[string]*clusterM{}}
	k.api = &client{url: p.url, token: p.token("alice"), hc: &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}}
	k.events = &consumer{addr: ps}
	k.events.subscribe(t)
	k.events.start(t)
	t.Cleanup(k.events.stop)
	// A kill loses what changed in the last second, subscriptions too:
	// act once the data file has them.
	wait.For(k.t, "the subscriptions in the data file", func() (bool, string) {
		b, _ := os.ReadFile(data)
		for _, typ := range event.Types {
			if !bytes.Contains(b, []byte(subName(typ))) {
				return false, "no " + subName(typ)
			}
		}
		return true, ""
	})

	steps := []struct {
		name string
		do   func()
	}{
		{"create cluster a with pools a1, a2", func() { k.createCluster("a", "a1", "a2") }},
		{"create pool a3", func() { k.waitClusterReady("a"); k.createPool("a", "a3") }},
		{"resize a1 to 2", func() { k.waitPoolReady("a", "a1"); k.resize("a", "a1", 2) }},
		{"delete pool a2", func() { k.waitPoolReady("a", "a2"); k.deletePool("a", "a2") }},
		{"create cluster b with pool b1", func() { k.createCluster("b", "b1") }},
		{"resize a1 to 3", func() { k.waitPoolReady("a", "a1"); k.resize("a", "a1", 3) }},
		{"resize b1 to 2", func() { k.waitPoolReady("b", "b1"); k.resize("b", "b1", 2) }},
		{"delete cluster b", func() { k.waitPoolReady("b", "b1"); k.deleteCluster("b") }},
		{"delete pool a3", func() { k.waitPoolReady("a", "a3"); k.deletePool("a", "a3") }},
	}
	// Kills: 3 to 5, each some time after one of the steps, from at once
	// to 1.5 s, while what it asked converges. Some (one at least) wait
	// then for the data file to hold a running GKE operation, so that the
	// restart finds it running.
	type kill struct {
		after int
		delay time.Duration
		midOp bool
	}
	var kills []kill
	for range 3 + rng.IntN(3) {
		kills = append(kills, kill{after: rng.IntN(len(steps)), delay: time.Duration(rng.Int64N(int64(1500 * time.Millisecond))), midOp: rng.IntN(2) == 0})
	}
	kills[rng.IntN(len(kills))].midOp = true
	sort.Slice(kills, func(i, j int) bool {
		if kills[i].after != kills[j].after {
			return kills[i].after < kills[j].after
		}
		return kills[i].delay < kills[j].delay
	})
	for i, st := range steps {
		t.Logf("%6.2fs step %d: %s", time.Since(begin).Seconds(), i+1, st.name)
		st.do()
		done := time.Now()
		for _, kl := range kills {
			if kl.after != i {
				continue
			}
			time.Sleep(time.Until(done.Add(kl.delay)))
			when := fmt.Sprintf("%v after step %d", kl.delay.Round(time.Millisecond), i+1)
			if kl.midOp {
				when += k.waitRunningOperation(data, done)
			}
			k.killAndRestart(when)
		}
	}

	t.Logf("%6.2fs waiting for convergence", time.Since(begin).Seconds())
	k.checkConverged()
	k.checkProvider()
	k.checkEvents()
	// A SIGKILL 50 ms after SIGTERM, while the last save may be under
	// way, leaves a data file the next process starts from.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	k.killAndRestart("50ms after SIGTERM")
	k.checkConverged()
	if err := p.stop(); err != nil {
		t.Errorf("devstack after SIGTERM: %v", err)
	}
	k.checkDataFile(data)
	t.Logf("%6.2fs done: %d kills, %d processes", time.Since(begin).Seconds(), len(kills), p.n)
}

// freeAddr returns a free 127.0.0.1 address.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// process is the devstack command in a child process, started again with
// the same flags after each kill.
type process struct {
	t      *testing.T
	dir    string
	args   []string
	url    string
	n      int // processes started
	cmd    *exec.Cmd
	exited chan error
	log    string // the current process's log file
	gke    string // its GKE simulator's address
}

func (p *process) start() {
	p.t.Helper()
	p.begin(false)
}

// startOn is start for a first process, whose addresses were chosen free
// but may have been taken since: it reports false, having started none,
// when the process could not listen on one of them.
func (p *process) startOn() bool {
	p.t.Helper()
	return p.begin(true)
}

// begin starts the process and waits until it is ready; with bindRetry a
// process that exits because an address is in use makes it return false.
func (p *process) begin(bindRetry bool) bool {
	t := p.t
	t.Helper()
	p.n++
	p.log = filepath.Join(p.dir, fmt.Sprintf("devstack-%d.log", p.n))
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], p.args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start devstack: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); f.Close() }()
	p.cmd, p.exited = cmd, exited
	p.gke = ""
	taken := false
	wait.Within(t, killWait, fmt.Sprintf("devstack %d ready", p.n), func() (bool, string) {
		select {
		case err := <-exited:
			p.exited <- err
			if tail := p.tail(); bindRetry && strings.Contains(tail, "address already in use") {
				taken = true
				return true, ""
			}
			t.Fatalf("devstack %d exited while starting: %v\n%s", p.n, err, p.tail())
		default:
		}
		p.gke = p.readyLine()
		return p.gke != "", "its log ends:\n" + p.tail()
	})
	return !taken
}

// readyLine returns the GKE address the current process logged once
// ready, or "".
func (p *process) readyLine() string {
	b, _ := os.ReadFile(p.log)
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct{ Message, GKE string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Message == "Devstack ready" {
			return l.GKE
		}
	}
	return ""
}

// tail returns the end of the current process's log.
func (p *process) tail() string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}

func (p *process) kill() {
	// It may have exited already, after a SIGTERM.
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	p.cmd = nil
}

// stop ends the process as a user would, with SIGTERM.
func (p *process) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-p.exited:
		p.cmd = nil
		return err
	case <-time.After(killWait):
		return fmt.Errorf("still running %v after SIGTERM", killWait)
	}
}

func (p *process) cleanup() {
	if p.cmd != nil {
		p.kill()
	}
	if p.t.Failed() {
		p.t.Logf("log of devstack %d:\n%s", p.n, p.tail())
	}
}

// token asks the process for a development token.
func (p *process) token(sub string) string {
	resp, err := http.Post(p.url+"/dev/token", "application/json", strings.NewReader(`{"sub":"`+sub+`"}`))
	if err != nil {
		p.t.Fatalf("POST /dev/token: %v", err)
	}
	defer resp.Body.Close()
	var out struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Token == "" {
		p.t.Fatalf("POST /dev/token = %s: %v", resp.Status, err)
	}
	return out.Token
}

// accessToken asks the process for the reconciler's access token, which
// its GKE simulator takes in the platform's project.
func (p *process) accessToken() string {
	resp, err := http.Post(p.url+devstack.AccessTokenPath, "application/json", strings.NewReader(`{}`))
	if err != nil {
		p.t.Fatalf("POST %s: %v", devstack.AccessTokenPath, err)
	}
	defer resp.Body.Close()
	var out struct{ AccessToken string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.AccessToken == "" {
		p.t.Fatalf("POST %s = %s: %v", devstack.AccessTokenPath, resp.Status, err)
	}
	return out.AccessToken
}

// The model: what the test asked for, by name. A cluster or node pool a
// kill lost is made again under the same name, and its lost IDs are kept
// apart.
type clusterM struct {
	name     string
	id       string
	provider string // its name at GKE
	deleted  bool
	at       time.Time // when it was last changed (a kill may lose it)
	pools    map[string]*poolM
	lost     []string
	initial  []string // the pools it was created with
}

type poolM struct {
	name        string
	id          string
	withCluster bool
	counts      []int // the node counts asked, in order; each is reached
	deleted     bool
	at          time.Time
	lost        []string
}

func (p *poolM) count() int { return p.counts[len(p.counts)-1] }

type killTest struct {
	t        *testing.T
	p        *process
	api      *client
	events   *consumer
	clusters map[string]*clusterM
	lastKill time.Time
}

func (k *killTest) createCluster(name string, pools ...string) {
	t := k.t
	t.Helper()
	var specs []map[string]any
	for _, p := range pools {
		specs = append(specs, poolSpec(p, 1))
	}
	body := map[string]any{"tenantId": "acme", "poolId": "pool-dev", "name": "kill-" + name, "mode": "standard", "region": "us-central1", "nodePools": specs}
	var cl resource.Cluster
	if err := k.api.call("kubernetesClusters/create", body, &cl); err != nil {
		t.Fatalf("create cluster %s: %v", name, err)
	}
	c := k.clusters[name]
	if c == nil {
		c = &clusterM{name: name, initial: pools}
		k.clusters[name] = c
	}
	c.id, c.provider, c.at, c.pools = cl.ID, providerName(cl), time.Now(), map[string]*poolM{}
	ps, err := k.api.listPools(cl.ID)
	if err != nil || len(ps) != len(pools) {
		t.Fatalf("list the pools of new cluster %s = %d pools, %v; want %d", name, len(ps), err, len(pools))
	}
	for _, p := range ps {
		c.pools[p.Name] = &poolM{name: p.Name, id: p.ID, withCluster: true, counts: []int{1}, at: c.at}
	}
}

func (k *killTest) createPool(cluster, name string) {
	t := k.t
	t.Helper()
	c := k.clusters[cluster]
	body := map[string]any{"tenantId": "acme", "clusterId": c.id}
	for key, v := range poolSpec(name, 1) {
		body[key] = v
	}
	var np resource.NodePool
	if err := k.api.call("kubernetesNodePools/create", body, &np); err != nil {
		t.Fatalf("create node pool %s/%s: %v", cluster, name, err)
	}
	p := c.pools[name]
	if p == nil {
		p = &poolM{name: name, counts: []int{1}}
		c.pools[name] = p
	}
	p.id, p.at = np.ID, time.Now()
}

// resize asks for count nodes, unless again: then it asks again for the
// count a kill lost.
func (k *killTest) resize(cluster, name string, count int) {
	t := k.t
	t.Helper()
	c := k.clusters[cluster]
	p := c.pools[name]
	body := map[string]any{"tenantId": "acme", "clusterId": c.id, "nodePoolId": p.id, "nodeCount": count}
	if err := k.api.call("kubernetesNodePools/update", body, nil); err != nil {
		t.Fatalf("resize node pool %s/%s to %d: %v", cluster, name, count, err)
	}
	if p.count() != count {
		p.counts = append(p.counts, count)
	}
	p.at = time.Now()
}

func (k *killTest) deletePool(cluster, name string) {
	t := k.t
	t.Helper()
	c := k.clusters[cluster]
	p := c.pools[name]
	if err := k.api.call("kubernetesNodePools/delete", map[string]any{"tenantId": "acme", "clusterId": c.id, "nodePoolId": p.id}, nil); err != nil {
		t.Fatalf("delete node pool %s/%s: %v", cluster, name, err)
	}
	p.deleted, p.at = true, time.Now()
}

func (k *killTest) deleteCluster(name string) {
	t := k.t
	t.Helper()
	c := k.clusters[name]
	if err := k.api.call("kubernetesClusters/delete", map[string]any{"tenantId": "acme", "clusterId": c.id}, nil); err != nil {
		t.Fatalf("delete cluster %s: %v", name, err)
	}
	c.deleted, c.at = true, time.Now()
}

func (k *killTest) waitClusterReady(name string) {
	k.t.Helper()
	c := k.clusters[name]
	wait.For(k.t, "cluster "+name+" ready", func() (bool, string) {
		cl, err := k.api.getCluster(c.id)
		return err == nil && cl.State == resource.StateReady, k.api.clusterState(c.id)
	})
}

func (k *killTest) waitPoolReady(cluster, name string) {
	k.t.Helper()
	c := k.clusters[cluster]
	p := c.pools[name]
	wait.For(k.t, fmt.Sprintf("node pool %s/%s ready with %d nodes", cluster, name, p.count()), func() (bool, string) {
		ps, err := k.api.listPools(c.id)
		if err != nil {
			return false, err.Error()
		}
		for _, np := range ps {
			if np.ID == p.id {
				return np.State == resource.StateReady && np.NodeCount == p.count(), k.api.clusterState(c.id)
			}
		}
		return false, "no such pool; " + k.api.clusterState(c.id)
	})
}

// waitRunningOperation waits until the data file, written since the time
// after, holds a running GKE operation, and says how long it waited.
func (k *killTest) waitRunningOperation(path string, after time.Time) string {
	start := time.Now()
	var found string
	// The kill lands after 5 s whether or not an operation was seen.
	wait.Poll(5*time.Second, 20*time.Millisecond, func() bool {
		if fi, err := os.Stat(path); err != nil || !fi.ModTime().After(after) {
			return false
		}
		b, _ := os.ReadFile(path)
		var d struct {
			GKE struct {
				Operations []struct {
					Operation struct{ Status, OperationType, TargetLink string }
				}
			}
		}
		if json.Unmarshal(b, &d) != nil {
			return false
		}
		for _, op := range d.GKE.Operations {
			if op.Operation.Status == "RUNNING" {
				found = fmt.Sprintf(", then %v until the data file held the running %s of %s",
					time.Since(start).Round(time.Millisecond), op.Operation.OperationType, op.Operation.TargetLink[strings.LastIndex(op.Operation.TargetLink, "/clusters/")+1:])
				return true
			}
		}
		return false
	})
	if found == "" {
		return ", then 5s: the data file held no running operation"
	}
	return found
}

// killAndRestart kills the process, starts it again with the same data
// file, and makes again what the kill lost.
func (k *killTest) killAndRestart(when string) {
	t := k.t
	t.Helper()
	k.p.kill()
	k.lastKill = time.Now()
	k.events.stop()
	size := "no data file"
	if fi, err := os.Stat(k.p.args[slices.Index(k.p.args, "-data")+1]); err == nil {
		size = fmt.Sprintf("data file %d bytes", fi.Size())
	}
	t.Logf("killed devstack %d %s (%s)", k.p.n, when, size)
	k.p.start()
	k.api.hc.CloseIdleConnections()
	k.events.start(t)
	k.repair()
}

// repair compares what the restarted stack has with what the test asked
// for, and asks again for what a kill lost: only changes made within
// lossWindow of the kill may be lost.
func (k *killTest) repair() {
	t := k.t
	t.Helper()
	lost := func(what string, at time.Time) {
		t.Helper()
		age := k.lastKill.Sub(at)
		t.Logf("lost with the kill, asked again: %s (asked %v before the kill)", what, age.Round(time.Millisecond))
		if age > lossWindow {
			t.Errorf("the kill lost %s, asked %v before it; want at most %v", what, age.Round(time.Millisecond), lossWindow)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(k.clusters)) {
		c := k.clusters[name]
		cl, err := k.api.getCluster(c.id)
		var ae *apiError
		if errors.As(err, &ae) && ae.Code == "NOT_FOUND" {
			if c.deleted {
				continue
			}
			lost("cluster "+name+"'s create", c.at)
			c.lost = append(c.lost, c.id)
			old := c.pools
			k.createCluster(name, c.initial...)
			// The pools added to it since were lost with it.
			for pname, p := range old {
				if p.withCluster || p.deleted {
					continue
				}
				p.lost = append(p.lost, p.id)
				k.createPool(name, pname)
				for _, n := range p.counts[1:] {
					k.resize(name, pname, n)
				}
			}
			continue
		}
		if err != nil {
			t.Fatalf("get cluster %s after the restart: %v", name, err)
		}
		if c.deleted {
			if cl.State != resource.StateDeleting && cl.State != resource.StateDeleted {
				lost("cluster "+name+"'s delete", c.at)
				k.deleteCluster(name)
			}
			continue
		}
		ps, err := k.api.listPools(c.id)
		if err != nil {
			t.Fatalf("list the pools of %s after the restart: %v", name, err)
		}
		byID := map[string]resource.NodePool{}
		for _, np := range ps {
			byID[np.ID] = np
		}
		for _, pname := range slices.Sorted(maps.Keys(c.pools)) {
			p := c.pools[pname]
			np, ok := byID[p.id]
			switch {
			case !ok && p.deleted:
			case !ok:
				lost("node pool "+name+"/"+pname+"'s create", p.at)
				p.lost = append(p.lost, p.id)
				k.createPool(name, pname)
				for _, n := range p.counts[1:] {
					k.resize(name, pname, n)
				}
			case p.deleted && np.State != resource.StateDeleting && np.State != resource.StateDeleted:
				lost("node pool "+name+"/"+pname+"'s delete", p.at)
				k.deletePool(name, pname)
			case !p.deleted && np.NodeCount != p.count():
				lost(fmt.Sprintf("node pool %s/%s's resize to %d", name, pname, p.count()), p.at)
				k.resize(name, pname, p.count())
			}
		}
	}
}

// checkConverged waits until every cluster and pool is as asked: ready
// with its node count, or deleted and gone from the API.
func (k *killTest) checkConverged() {
	k.t.Helper()
	for _, name := range slices.Sorted(maps.Keys(k.clusters)) {
		c := k.clusters[name]
		wait.For(k.t, "cluster "+name+" converged", func() (bool, string) {
			cl, err := k.api.getCluster(c.id)
			if c.deleted {
				var ae *apiError
				return errors.As(err, &ae) && ae.Code == "NOT_FOUND", k.api.clusterState(c.id)
			}
			if err != nil || cl.State != resource.StateReady {
				return false, k.api.clusterState(c.id)
			}
			ps, err := k.api.listPools(c.id)
			if err != nil {
				return false, err.Error()
			}
			var got, want []string
			for _, np := range ps {
				got = append(got, fmt.Sprintf("%s %s %d", np.ID, np.State, np.NodeCount))
			}
			for _, p := range c.pools {
				if !p.deleted {
					want = append(want, fmt.Sprintf("%s %s %d", p.id, resource.StateReady, p.count()))
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			return slices.Equal(got, want), fmt.Sprintf("pools %v, want %v", got, want)
		})
	}
}

// checkProvider checks the GKE simulator of the last process: the
// clusters that are not deleted and their pools that are not, RUNNING,
// and no operation still running.
func (k *killTest) checkProvider() {
	t := k.t
	t.Helper()
	ctx := context.Background()
	gke, err := container.NewClusterManagerClient(ctx, option.WithEndpoint(k.p.gke), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithGRPCDialOption(grpc.WithPerRPCCredentials(iamemu.Bearer(k.p.accessToken()))))
	if err != nil {
		t.Fatalf("GKE client: %v", err)
	}
	defer gke.Close()
	want := map[string][]string{}
	for _, c := range k.clusters {
		if c.deleted {
			continue
		}
		for _, p := range c.pools {
			if !p.deleted {
				want[c.provider] = append(want[c.provider], p.name)
			}
		}
		slices.Sort(want[c.provider])
	}
	wait.For(k.t, "the GKE simulator converged", func() (bool, string) {
		resp, err := gke.ListClusters(ctx, &containerpb.ListClustersRequest{Parent: "projects/bc-dev/locations/-"})
		if err != nil {
			return false, err.Error()
		}
		got := map[string][]string{}
		for _, cl := range resp.Clusters {
			name := strings.TrimPrefix(cl.SelfLink, "https://container.googleapis.com/v1/")
			got[name] = []string{}
			if cl.Status != containerpb.Cluster_RUNNING {
				return false, fmt.Sprintf("cluster %s %v", name, cl.Status)
			}
			for _, np := range cl.NodePools {
				if np.Status != containerpb.NodePool_RUNNING {
					return false, fmt.Sprintf("pool %s/%s %v", name, np.Name, np.Status)
				}
				got[name] = append(got[name], np.Name)
			}
			slices.Sort(got[name])
		}
		ops, err := gke.ListOperations(ctx, &containerpb.ListOperationsRequest{Parent: "projects/bc-dev/locations/-"})
		if err != nil {
			return false, err.Error()
		}
		for _, op := range ops.Operations {
			if op.Status != containerpb.Operation_DONE {
				return false, fmt.Sprintf("operation %s %v on %s still %v", op.Name, op.OperationType, op.TargetLink, op.Status)
			}
		}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("GKE has %v, want %v", got, want)
	})
}

// checkEvents waits until the subscriber has every event the contract
// promises for every cluster and pool (API.md §7), then checks that none
// announced an error. Redeliveries, and an event announced again after a
// kill, are allowed; a missing one is not. Events of what a kill lost
// may have been published, and are only counted.
func (k *killTest) checkEvents() {
	t := k.t
	t.Helper()
	missing := func() []string {
		var out []string
		have := k.events.index()
		need := func(typ, id string, count int) {
			key := typ + " " + id
			if count > 0 {
				key += fmt.Sprintf(" nodeCount %d", count)
			}
			if !have[key] {
				out = append(out, key)
			}
		}
		for _, c := range k.clusters {
			need(event.ClusterCreated, c.id, 0)
			need(event.ClusterReady, c.id, 0)
			if c.deleted {
				need(event.ClusterDeleted, c.id, 0)
			}
			for _, p := range c.pools {
				if !p.withCluster {
					need(event.NodePoolCreated, p.id, 0)
				}
				for _, n := range p.counts {
					need(event.NodePoolReady, p.id, n)
				}
				if p.deleted || c.deleted {
					need(event.NodePoolDeleted, p.id, 0)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	wait.For(k.t, "every event", func() (bool, string) {
		m := missing()
		return len(m) == 0, fmt.Sprintf("missing %v", m)
	})
	all, distinct := k.events.counts()
	lostIDs := map[string]bool{}
	for _, c := range k.clusters {
		for _, id := range c.lost {
			lostIDs[id] = true
		}
		for _, p := range c.pools {
			for _, id := range p.lost {
				lostIDs[id] = true
			}
		}
	}
	phantom := 0
	for _, e := range k.events.all() {
		if e.Type == event.ClusterError || e.Type == event.NodePoolError {
			t.Errorf("event %s about %s %s: %s", e.Type, e.Attrs["clusterId"], e.Attrs["nodePoolId"], e.Data)
		}
		if lostIDs[e.Attrs["clusterId"]] || lostIDs[e.Attrs["nodePoolId"]] {
			phantom++
		}
	}
	t.Logf("events: %d received, %d distinct, %d about what a kill lost", all, distinct, phantom)
	for _, name := range slices.Sorted(maps.Keys(k.clusters)) {
		k.checkSequence(k.clusters[name].id)
	}
}

// checkSequence waits until the events of the cluster's chain are
// numbered by ce-sequence from 1 to the highest received with no gap, and
// checks that every delivery of an event carries one number. A number
// may have been given twice: to an event published just before a kill
// that lost the change, and to the event of what was asked again.
func (k *killTest) checkSequence(clusterID string) {
	t := k.t
	t.Helper()
	chain := "cluster/" + clusterID
	again := 0
	wait.For(t, "the events of "+chain+" numbered without a gap", func() (bool, string) {
		byID := map[string]int64{}
		numbers := map[int64]map[string]bool{}
		var last int64
		for _, ev := range k.events.all() {
			e := apiclient.Event{Attributes: ev.Attrs}
			if e.Chain() != chain {
				continue
			}
			n, ok := e.Sequence()
			if !ok {
				t.Fatalf("%s of %s has ce-sequence %q", ev.Type, chain, ev.Attrs["ce-sequence"])
			}
			if had, ok := byID[ev.ID]; ok && had != n {
				t.Fatalf("event %s of %s delivered as %d and as %d", ev.ID, chain, had, n)
			}
			byID[ev.ID] = n
			if numbers[n] == nil {
				numbers[n] = map[string]bool{}
			}
			numbers[n][ev.ID] = true
			last = max(last, n)
		}
		again = 0
		for n := int64(1); n <= last; n++ {
			if len(numbers[n]) == 0 {
				return false, fmt.Sprintf("no event %d of %d", n, last)
			}
			again += len(numbers[n]) - 1
		}
		return last > 0, "no events"
	})
	if again > 0 {
		t.Logf("%s: %d numbers given again after a kill lost the events' changes", chain, again)
	}
}

// checkDataFile checks the data file the last process wrote when it
// stopped: whole, with every part, and no temporary file beside it.
func (k *killTest) checkDataFile(path string) {
	t := k.t
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("data file: %v", err)
	}
	var d map[string]json.RawMessage
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("data file after SIGTERM: %v", err)
	}
	for _, part := range []string{"version", "issuer", "pubsub", "gke", "documents"} {
		if len(d[part]) == 0 {
			t.Errorf("data file has no %q", part)
		}
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file beside the data file after SIGTERM: %v", err)
	}
}

// consumer pulls every event topic through one subscription each, made
// before anything happened, from one process after another.
type consumer struct {
	addr   string
	mu     sync.Mutex
	events []received
	stopFn func()
}

func (c *consumer) client(t *testing.T) *pubsub.Client {
	t.Helper()
	ps, err := pubsub.NewClient(context.Background(), "bc-dev", option.WithEndpoint(c.addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatalf("pubsub client: %v", err)
	}
	return ps
}

func subName(typ string) string { return "projects/bc-dev/subscriptions/kill-" + typ }

func (c *consumer) subscribe(t *testing.T) {
	t.Helper()
	ps := c.client(t)
	defer ps.Close()
	for _, typ := range event.Types {
		_, err := ps.SubscriptionAdminClient.CreateSubscription(context.Background(), &pubsubpb.Subscription{
			Name: subName(typ), Topic: "projects/bc-dev/topics/" + typ, AckDeadlineSeconds: 10,
		})
		if err != nil {
			t.Fatalf("create subscription for %s: %v", typ, err)
		}
	}
}

// start pulls from the current process until stop. The subscriptions are
// the process's own after a restart: it keeps them in its data file.
func (c *consumer) start(t *testing.T) {
	t.Helper()
	ps := c.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, typ := range event.Types {
		sub := ps.Subscriber(subName(typ))
		// A killed process takes no acknowledgements: do not wait for
		// them when the receiver stops.
		sub.ReceiveSettings.ShutdownOptions = &pubsub.ShutdownOptions{Timeout: 0}
		wg.Add(1)
		go func() {
			defer wg.Done()
			logged := false
			for ctx.Err() == nil {
				err := sub.Receive(ctx, func(_ context.Context, m *pubsub.Message) {
					e := received{Type: m.Attributes["ce-type"], ID: m.Attributes["ce-id"], Subject: m.Attributes["ce-subject"], Attrs: m.Attributes, Data: m.Data}
					c.mu.Lock()
					c.events = append(c.events, e)
					c.mu.Unlock()
					m.Ack()
				})
				if err != nil && ctx.Err() == nil {
					if !logged {
						t.Logf("receive %s: %v; trying again", typ, err)
						logged = true
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	c.stopFn = func() { cancel(); wg.Wait(); ps.Close() }
}

func (c *consumer) stop() {
	if c.stopFn != nil {
		c.stopFn()
		c.stopFn = nil
	}
}

func (c *consumer) all() []received {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

// index returns the events received as "type id" (the pool's ID for pool
// events, the cluster's otherwise), plus " nodeCount N" for pool ready
// events, with the count in their data.
func (c *consumer) index() map[string]bool {
	out := map[string]bool{}
	for _, e := range c.all() {
		id := e.Attrs["clusterId"]
		if p := e.Attrs["nodePoolId"]; p != "" {
			id = p
		}
		key := e.Type + " " + id
		if e.Type == event.NodePoolReady {
			var np resource.NodePool
			if json.Unmarshal(e.Data, &np) == nil {
				key += fmt.Sprintf(" nodeCount %d", np.NodeCount)
			}
		}
		out[key] = true
	}
	return out
}

func (c *consumer) counts() (all, distinct int) {
	seen := map[string]bool{}
	for _, e := range c.all() {
		all++
		if !seen[e.ID] {
			seen[e.ID] = true
			distinct++
		}
	}
	return all, distinct
}
