package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/better-compute/kubernetes/shared/client"
)

// Exit codes: what a script can test after bc.
const (
	exitOK          = 0
	exitFailure     = 1 // anything not below: the network, a local file, an answer not understood
	exitUsage       = 2 // an unknown command or flag, a flag value bc cannot parse, a missing required flag
	exitInvalid     = 3 // INVALID_INPUT: the API refused the input; stderr names each field and its flag
	exitNotFound    = 4 // NOT_FOUND
	exitConflict    = 5 // CONFLICT or INVALID_STATE
	exitAuth        = 6 // UNAUTHENTICATED or PERMISSION_DENIED: bc login, or ask for a role
	exitRefused     = 7 // QUOTA_EXCEEDED or UNSUPPORTED
	exitUnavailable = 8 // UNAVAILABLE after retries, or INTERNAL
	exitFailed      = 9 // --wait: the resource reached state error; stderr has the provider's message
	exitTimeout     = 10
)

const exitCodesHelp = `Exit codes:
  0   success
  1   failure not listed below (network, local file, unexpected answer)
  2   usage: unknown command or flag, unparsable or missing flag
  3   INVALID_INPUT: the API refused the input (stderr names each field and its flag)
  4   NOT_FOUND
  5   CONFLICT or INVALID_STATE
  6   UNAUTHENTICATED or PERMISSION_DENIED (bc login)
  7   QUOTA_EXCEEDED or UNSUPPORTED
  8   UNAVAILABLE after retries, or INTERNAL
  9   --wait: the resource reached state error (stderr has the provider's message)
  10  --wait: --timeout passed first
`

// exitCode is the exit code of an API error code.
func exitCode(code string) int {
	switch code {
	case client.CodeInvalidInput:
		return exitInvalid
	case client.CodeNotFound:
		return exitNotFound
	case client.CodeConflict, client.CodeInvalidState:
		return exitConflict
	case client.CodeUnauthenticated, client.CodePermissionDenied:
		return exitAuth
	case client.CodeQuotaExceeded, client.CodeUnsupported:
		return exitRefused
	case client.CodeUnavailable, client.CodeInternal:
		return exitUnavailable
	}
	return exitFailure
}

// app is one run of bc.
type app struct {
	ctx    context.Context
	lookup func(string) (string, bool)
	stdout io.Writer
	stderr io.Writer

	// Global flags.
	url, tenant, token, output, configFile string
	// pollInterval is the first wait between polls of --wait (hidden:
	// for tests and demos against a fast devstack).
	pollInterval time.Duration

	cfgPath string
	cfg     config
}

// usageError is a mistake on the command line.
type usageError struct{ error }

func (e *usageError) Unwrap() error { return e.error }

// fieldError is an INVALID_INPUT whose fields are named by their flags.
type fieldsError struct {
	err   *client.Error
	flags map[string]string // JSON path (prefix) → flag
}

func (e *fieldsError) Error() string { return e.err.Error() }

// run runs bc with args and returns its exit code.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	a := &app{ctx: ctx, lookup: lookup, stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	markRunErrors(root)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	// What cobra refuses before a command runs (an unknown command, a
	// missing required flag) is a mistake on the command line.
	var re *runError
	if !errors.As(err, &re) {
		var ue *usageError
		if !errors.As(err, &ue) {
			err = &usageError{err}
		}
	}
	return a.report(err)
}

// runError is an error of a command's own run.
type runError struct{ error }

func (e *runError) Unwrap() error { return e.error }

// markRunErrors wraps the errors of every command's run in runError.
func markRunErrors(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := run(cmd, args); err != nil {
				return &runError{err}
			}
			return nil
		}
	}
	if pre := c.PersistentPreRunE; pre != nil {
		c.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
			if err := pre(cmd, args); err != nil {
				return &runError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markRunErrors(sub)
	}
}

// report prints err on stderr and returns its exit code.
func (a *app) report(err error) int {
	var (
		ue *usageError
		fe *fieldsError
		we *client.FailedError
		ce *client.Error
	)
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(a.stderr, "error: %v\nRun 'bc --help' for usage.\n", ue.error)
		return exitUsage
	case errors.As(err, &we):
		fmt.Fprintf(a.stderr, "error: %s %s (%s) failed: %s\n", we.Kind, we.Name, we.ID, we.Message)
		return exitFailed
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(a.stderr, "error: %v\n", err)
		return exitTimeout
	case errors.As(err, &fe):
		a.printAPIError(fe.err, fe.flags)
		return exitCode(fe.err.Code)
	case errors.As(err, &ce):
		a.printAPIError(ce, nil)
		return exitCode(ce.Code)
	}
	fmt.Fprintf(a.stderr, "error: %v\n", err)
	return exitFailure
}

// printAPIError prints the API's error: its code and message, then each
// broken field with the flag that sets it, then the request ID.
func (a *app) printAPIError(e *client.Error, flags map[string]string) {
	msg := e.Message
	if msg == "" || msg == e.Code {
		msg = strings.ToLower(strings.ReplaceAll(e.Code, "_", " "))
	}
	fmt.Fprintf(a.stderr, "error: %s: %s\n", e.Code, msg)
	for _, d := range e.Details {
		if d.Field == "" {
			// OUTCOME_UNKNOWN: the message says to retry with the key.
			fmt.Fprintf(a.stderr, "  %s\n", d.Reason)
			continue
		}
		if flag := flagOf(flags, d.Field); flag != "" {
			fmt.Fprintf(a.stderr, "  %s (%s): %s\n", flag, d.Field, d.Reason)
		} else {
			fmt.Fprintf(a.stderr, "  %s: %s\n", d.Field, d.Reason)
		}
	}
	switch e.Code {
	case client.CodeUnauthenticated:
		fmt.Fprintln(a.stderr, "  (log in again: bc login --dev, or bc login --token TOKEN)")
	}
	if e.RequestID != "" {
		fmt.Fprintf(a.stderr, "  request ID: %s\n", e.RequestID)
	}
}

// flagOf returns the flag that sets the field at path: the flag of the
// longest path in flags that is path or holds it.
func flagOf(flags map[string]string, path string) string {
	best, flag := -1, ""
	for p, f := range flags {
		if (path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[")) && len(p) > best {
			best, flag = len(p), f
		}
	}
	return flag
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "bc",
		Short: "bc manages Better Compute Kubernetes clusters and node pools",
		Long: "bc manages Better Compute Kubernetes clusters and node pools, shows pools' substrates, and tails their events.\n\n" +
			"The API's URL, the tenant and the token come from --url, --tenant and --token, then from\n" +
			"BC_URL, BC_TENANT and BC_TOKEN, then from the config file (BC_CONFIG, written by bc login).\n\n" + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.loadConfig()
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.url, "url", "", "URL of the API (BC_URL; the devstack: http://127.0.0.1:8080)")
	pf.StringVar(&a.tenant, "tenant", "", "tenant (BC_TENANT)")
	pf.StringVar(&a.token, "token", "", "bearer token (BC_TOKEN)")
	pf.StringVarP(&a.output, "output", "o", "table", "output format: table, json or yaml")
	pf.StringVar(&a.configFile, "config", "", "config file (BC_CONFIG)")
	pf.DurationVar(&a.pollInterval, "poll-interval", 500*time.Millisecond, "first wait between polls of --wait")
	_ = pf.MarkHidden("poll-interval")

	root.AddCommand(a.loginCommand(), a.configCommand(), a.clustersCommand(), a.nodePoolsCommand(), a.substratesCommand(), a.eventsCommand())
	root.AddCommand(&cobra.Command{
		Use:   "exit-codes",
		Short: "What each exit code of bc means",
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprint(a.stdout, exitCodesHelp) },
	})
	// A group without a known subcommand shows its help; an unknown one
	// is a usage error.
	for _, c := range root.Commands() {
		if c.HasSubCommands() && c.RunE == nil {
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					return &usageError{fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())}
				}
				return cmd.Help()
			}
		}
	}
	return root
}

// loadConfig reads the config file and applies the environment and flags
// over it.
func (a *app) loadConfig() error {
	if a.output != "table" && a.output != "json" && a.output != "yaml" {
		return &usageError{fmt.Errorf("--output %q: want table, json or yaml", a.output)}
	}
	path := a.configFile
	if path == "" {
		var err error
		if path, err = configPath(a.lookup); err != nil {
			return err
		}
	}
	a.cfgPath = path
	cfg, err := loadConfig(path)
	if err != nil {
		return err
	}
	a.cfg = cfg
	pick := func(flag, env string, cfg *string) string {
		if flag != "" {
			return flag
		}
		if v, ok := a.lookup(env); ok && v != "" {
			return v
		}
		return *cfg
	}
	a.url = pick(a.url, "BC_URL", &cfg.URL)
	a.tenant = pick(a.tenant, "BC_TENANT", &cfg.Tenant)
	a.token = pick(a.token, "BC_TOKEN", &cfg.Token)
	return nil
}

// client returns the API client, or a usage error naming what is missing.
// tenantClient is what every call of the API needs: the tenant and a
// client.
func (a *app) tenantClient() (string, *client.Client, error) {
	tenant, err := a.needTenant()
	if err != nil {
		return "", nil, err
	}
	c, err := a.client()
	return tenant, c, err
}

func (a *app) client() (*client.Client, error) {
	if a.url == "" {
		return nil, &usageError{errors.New("no API URL: run bc login, or give --url or BC_URL")}
	}
	return client.New(a.url, client.WithToken(a.token), client.WithUserAgent("bc/1"))
}

// needTenant returns the tenant, or a usage error.
func (a *app) needTenant() (string, error) {
	if a.tenant == "" {
		return "", &usageError{errors.New("no tenant: give --tenant, set BC_TENANT, or run bc config set tenant NAME")}
	}
	return a.tenant, nil
}

// waitAndPrint waits for a resource (what, as its progress lines name it)
// with the client's wait, showing each change of its state, then prints
// where it ended, even when the wait failed (error) or gave up.
func waitAndPrint[T any](a *app, what string, timeout time.Duration, start time.Time,
	wait func(context.Context, *client.WaitOptions) (*T, error), print func(*T) error) error {
	ctx, cancel := a.waitContext(timeout)
	defer cancel()
	opts, stop := a.waitOptions(what, start)
	got, err := wait(ctx, opts)
	stop()
	if got != nil {
		if perr := print(got); perr != nil && err == nil {
			err = perr
		}
	}
	return err
}

// waitOptions are the Wait helpers' options, printing each change of the
// resource's state to stderr with the time since start. On a terminal, a
// last line shows the time going by, rewritten until stop is called.
func (a *app) waitOptions(what string, start time.Time) (*client.WaitOptions, func()) {
	p := &progress{w: a.stderr, what: what, start: start, live: isTerminal(a.stderr), done: make(chan struct{})}
	if p.live {
		go p.tick()
	}
	return &client.WaitOptions{Interval: a.pollInterval, OnChange: p.change}, p.stop
}

// progress prints the state changes of a wait.
type progress struct {
	w     io.Writer
	what  string
	start time.Time
	live  bool

	mu       sync.Mutex
	state    client.State
	done     chan struct{}
	stopOnce sync.Once
}

const clearLine = "\r\x1b[K"

func (p *progress) change(o client.Observation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf("[%6.1fs] %s: %s", time.Since(p.start).Seconds(), p.what, o.State)
	if o.Message != "" {
		line += " (" + o.Message + ")"
	}
	if p.live {
		fmt.Fprint(p.w, clearLine)
	}
	fmt.Fprintln(p.w, line)
	p.state = o.State
	if p.live {
		p.status()
	}
}

// status writes the live line; the lock must be held.
func (p *progress) status() {
	fmt.Fprintf(p.w, "%s[%6.1fs] %s: %s ...", clearLine, time.Since(p.start).Seconds(), p.what, p.state)
}

func (p *progress) tick() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			p.mu.Lock()
			if p.state != "" {
				p.status()
			}
			p.mu.Unlock()
		}
	}
}

func (p *progress) stop() {
	p.stopOnce.Do(func() {
		close(p.done)
		if p.live {
			p.mu.Lock()
			fmt.Fprint(p.w, clearLine)
			p.mu.Unlock()
		}
	})
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// waitContext bounds a wait by --timeout.
func (a *app) waitContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return context.WithCancel(a.ctx)
	}
	return context.WithTimeout(a.ctx, timeout)
}
