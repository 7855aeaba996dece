package devstack

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	"github.com/better-compute/kubernetes/emulators/seed"
	"github.com/better-compute/kubernetes/functions/cloudrun"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/telemetry"
)

// Command is the devstack command (functions/cmd/devstack): it reads its
// flags from args, starts a stack, prints where everything listens and a
// token for alice to stderr, and serves until ctx ends (SIGINT or SIGTERM
// in the command), then closes the stack, which saves its data file. It
// logs to stdout (-log-format), and makes that logger slog's default, since
// parts of the stack log through it.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	fl := flag.NewFlagSet("devstack", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&cfg.Addr, "addr", "127.0.0.1:8080", "address of the API, the reconcile function, /healthz and /dev/token")
	allowedHosts := fl.String("allowed-hosts", "", "comma-separated names (or addresses) a request's Host may give besides loopback addresses and localhost, with any port; any other Host is refused 403")
	fl.StringVar(&cfg.PubSubAddr, "pubsub-addr", "127.0.0.1:8085", "address of the Pub/Sub emulator (PUBSUB_EMULATOR_HOST)")
	fl.StringVar(&cfg.FirestoreAddr, "firestore-addr", "127.0.0.1:8086", "address of the Firestore emulator (FIRESTORE_EMULATOR_HOST)")
	fl.StringVar(&cfg.Project, "project", "bc-dev", "Google Cloud project of every emulator")
	seedFile := fl.String("seed", defaultSeed, "seed file: accounts, pools, role bindings and tenants' quotas (the default, when there is no such file here, is the copy built into the devstack)")
	fl.StringVar(&cfg.DataFile, "data", "", "file keeping the state across restarts, even a kill -9: saved every second (none: start empty)")
	fl.DurationVar(&cfg.ConvergingInterval, "converging-interval", cloudrun.DefaultConvergingInterval, "time between reconcile runs while a cluster converges")
	fl.DurationVar(&cfg.SteadyInterval, "steady-interval", cloudrun.DefaultSteadyInterval, "time between reconcile runs of a ready or failed cluster")
	fl.DurationVar(&cfg.LeaseTTL, "lease-ttl", cloudrun.DefaultLeaseTTL, "how long a reconcile run may hold its cluster; a killed run's hold ends after it")
	fl.DurationVar(&cfg.GKEOperationTime, "gke-operation-time", gkeemu.DefaultOperationTime, "how long each simulated GKE operation takes")
	fl.IntVar(&cfg.GKERequestQuota, "gke-request-quota", 0, "each simulated project's GKE request quota, calls per minute (0: none); the reconciler spends 80% of it at most")
	fl.IntVar(&cfg.TenantQueues, "tenant-queues", 1, "how many Cloud Tasks queues take the changing chains' runs, each tenant's on one")
	fl.DurationVar(&cfg.WatchdogInterval, "watchdog-interval", DefaultWatchdogInterval, "how often the watchdog restarts dead chains and drains the outbox")
	fl.Float64Var(&cfg.TasksDuplicateRate, "tasks-duplicate-rate", 0, "share (0 to 1) of the Cloud Tasks emulator's attempts delivered twice at the same moment, as Cloud Tasks occasionally does")
	fl.BoolVar(&cfg.Kubernetes, "kubernetes", true, "give the simulated clusters a real Kubernetes API (kube-apiserver, built from source in the background at the first start: several minutes; GET /healthz/kubernetes says when it is ready)")
	fl.DurationVar(&cfg.KubernetesIdleTimeout, "kubernetes-idle-timeout", gkeemu.DefaultKubernetesIdleTimeout, "stop a simulated cluster's API server after this long without a request (its objects are kept; the next request starts it again; negative: never)")
	fl.IntVar(&cfg.KubernetesMaxRunning, "kubernetes-max-running", gkeemu.DefaultKubernetesMaxRunning, "most simulated clusters' API servers running at once (about 300 MB each): a start beyond it stops the least recently used one that serves no request, or waits until one can be stopped, its callers answered 503 with Retry-After meanwhile (negative: no bound)")
	fl.IntVar(&cfg.Instances, "instances", 1, "processes serving the functions: 1 serves them in the devstack's own process; more runs that many processes of the deployed server (functions/cmd/server's), each started again a second after it dies, with the API address, the Cloud Tasks dispatches and the watchdog spread across them (GET /dev/instances lists them)")
	logFormat := fl.String("log-format", "auto", "text (lines for a person), json (Cloud Logging's), or auto: text on a terminal, json otherwise")
	telemetryTo := fl.String("telemetry", "off", "the functions' metrics and traces: off, or stdout (JSON lines among the logs: the metrics every 30s, each span as it ends)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "devstack: unexpected arguments %q\n", fl.Args())
		fl.Usage()
		return fmt.Errorf("unexpected arguments %q", fl.Args())
	}

	for _, h := range strings.Split(*allowedHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			cfg.AllowedHosts = append(cfg.AllowedHosts, h)
		}
	}

	if r := cfg.TasksDuplicateRate; !(r >= 0 && r <= 1) { // NaN too
		err := fmt.Errorf("-tasks-duplicate-rate %v: want a share from 0 to 1", r)
		fmt.Fprintln(stderr, err)
		return err
	}

	if cfg.Instances < 1 {
		err := fmt.Errorf("-instances %d: want 1 or more", cfg.Instances)
		fmt.Fprintln(stderr, err)
		return err
	}
	if cfg.Instances > 1 {
		// The instances run the server's code from this very binary.
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("-instances: find the devstack's binary: %w", err)
		}
		cfg.InstanceCommand, cfg.InstanceOutput = []string{self, InstanceArg}, stdout
	}

	log, err := newLogger(*logFormat, stdout)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return err
	}
	slog.SetDefault(log)
	cfg.Log = log
	cfg.ConsoleFromStart = true
	switch *telemetryTo {
	case "off":
	case "stdout":
		tel, err := telemetry.NewStdout(stdout, 30*time.Second, telemetry.Resource("devstack"))
		if err != nil {
			return err
		}
		cfg.Telemetry = tel
		defer func() {
			// After the stack: what its closing recorded is printed too.
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tel.Shutdown(sctx); err != nil {
				log.Warn("Telemetry not printed whole at exit", "error", err)
			}
		}()
	default:
		err := fmt.Errorf("-telemetry %q: want off or stdout", *telemetryTo)
		fmt.Fprintln(stderr, err)
		return err
	}
	if err := serve(ctx, cfg, *seedFile, stderr); err != nil {
		log.Error("Devstack failed", "error", err)
		return err
	}
	return nil
}

// defaultSeed is the -seed of a devstack run from the repository's root.
const defaultSeed = "emulators/seed/devstack.json"

func serve(ctx context.Context, cfg Config, seedFile string, stderr io.Writer) error {
	if seedFile != "" {
		b, err := os.ReadFile(seedFile)
		if errors.Is(err, fs.ErrNotExist) && seedFile == defaultSeed {
			// Run from elsewhere than the repository's root.
			b, err = seed.DevStack, nil
		}
		if err != nil {
			return fmt.Errorf("read seed: %w", err)
		}
		if cfg.Seed, err = store.ParseSeed(b, lifecycle.Rules{}); err != nil {
			return err
		}
	}
	s, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	tok, err := s.Token("alice")
	if err != nil {
		s.Close()
		return err
	}
	cfg.Log.Info("Devstack ready",
		"api", s.URL, "firestore", s.Firestore.Addr, "pubsub", s.PubSub.Addr,
		"cloudTasks", s.Tasks.Addr(), "gke", s.GKE.Addr(), "compute", s.Compute.Addr(), "iamCredentials", s.IAM.Addr(), "project", s.cfg.Project, "data", cfg.DataFile)
	if !isLoopbackAddr(s.lis.Addr().String()) {
		fmt.Fprintf(stderr, "\nWARNING: -addr %s may be reached from other machines, and anyone who reaches it may act as any tenant.\nIt answers only requests whose Host is a loopback address, localhost or a name of -allowed-hosts.\n", s.lis.Addr())
	}
	fmt.Fprintf(stderr, `
Better Compute devstack is up.
  Console        %[1]s/console   (the fleet, each cluster's timeline, the events, the emulators, faults)
  API            %[1]s   (GET %[1]s/healthz)
  Firestore      FIRESTORE_EMULATOR_HOST=%[2]s
  Pub/Sub        PUBSUB_EMULATOR_HOST=%[3]s   (project %[4]s)
  Cloud Tasks    %[5]s
  GKE simulator  %[6]s   (callers need an access token: POST %[1]s/dev/access-token)
  Compute Engine http://%[10]s   (the simulator's instance groups: instanceGroupManagers get, aggregatedList)
  IAM emulator   %[8]s   (IAM Credentials; who may act in each simulated project:)%[9]s
  Kubernetes     GET %[1]s/healthz/kubernetes, then GET %[1]s/dev/clusters/<clusterId>/kubeconfig
  Faults         POST, GET, DELETE %[1]s/dev/faults   (fail, lose or slow any emulator's calls; the console's Act page)

A token for alice (kubernetes.admin of tenant acme), valid one hour:
  TOKEN=%[7]s
  # or: curl -s %[1]s/dev/token -H 'Content-Type: application/json' -d '{"sub":"alice"}'

Try:
  curl -s %[1]s/api/compute/kubernetesClusters/create -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' \
    -d '{"tenantId":"acme","poolId":"pool-dev","name":"prod","mode":"standard","region":"us-central1",
         "nodePools":[{"name":"default","machineType":"e2-standard-4","nodeCount":1}]}'
or with bc (go install ./functions/cmd/bc):
  bc login --dev --url %[1]s --tenant acme --pubsub-emulator %[3]s
  bc clusters create --name prod --pool pool-dev --region us-central1 \
    --node-pool name=default,machine-type=e2-standard-4,nodes=1 --wait
The API's documents: %[1]s/openapi.json and %[1]s/asyncapi.json

`, s.URL, s.Firestore.Addr, s.PubSub.Addr, s.cfg.Project, s.Tasks.Addr(), s.GKE.Addr(), tok, s.IAM.Addr(), s.iamSummary(), s.Compute.Addr())
	<-ctx.Done()
	cfg.Log.Info("Shutting down")
	return s.Close()
}

// newLogger returns the devstack's logger on out in the format asked.
func newLogger(format string, out io.Writer) (*slog.Logger, error) {
	switch format {
	case "auto":
		if isTerminal(out) {
			return logging.NewConsole(out, slog.LevelInfo, true), nil
		}
		return logging.New(out, slog.LevelInfo), nil
	case "text":
		return logging.NewConsole(out, slog.LevelInfo, isTerminal(out)), nil
	case "json":
		return logging.New(out, slog.LevelInfo), nil
	}
	return nil, fmt.Errorf("-log-format %q: want auto, text or json", format)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
