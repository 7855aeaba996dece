package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/wait"
)

// runMain makes the test binary run the server's main instead of the
// tests, so that each test starts the server as Cloud Run does: a process
// of its own, configured only through its environment.
const runMain = "SERVER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// server returns the command running main with exactly env.
func server(t *testing.T, env ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append([]string{runMain + "=1"}, env...)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	return cmd, out
}

func TestRefusesABrokenEnvironment(t *testing.T) {
	cmd, out := server(t, "FUNCTION_TARGET=watchdog", "GOOGLE_CLOUD_PROJECT=bc-test")
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("server with a broken environment = %v, want exit status 1\n%s", err, out)
	}
	for _, want := range []string{"Refusing to start", "TASKS_QUEUE", "RECONCILE_AUDIENCE", "SCHEDULER_SERVICE_ACCOUNT"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the logs do not say %q:\n%s", want, out)
		}
	}
}

// TestServesItsTarget starts the watchdog's service as Cloud Run would
// (FUNCTION_TARGET, PORT) and checks that its function answers on /, that
// it takes only POST, and that SIGTERM ends the process cleanly.
func TestServesItsTarget(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	lis.Close()
	const nowhere = "127.0.0.1:1" // nothing is reached before the token is checked
	cmd, out := server(t,
		"PORT="+port,
		"FUNCTION_TARGET=watchdog",
		"GOOGLE_CLOUD_PROJECT=bc-test",
		"TASKS_QUEUE=projects/bc-test/locations/us-central1/queues/reconcile",
		"RECONCILE_URL=http://"+nowhere+"/reconcile",
		"TASKS_SERVICE_ACCOUNT=tasks@bc-test.iam.gserviceaccount.com",
		"RECONCILE_AUDIENCE=http://"+nowhere+"/watchdog",
		"SCHEDULER_SERVICE_ACCOUNT=scheduler@bc-test.iam.gserviceaccount.com",
		"RECONCILE_ISSUER_URL=http://"+nowhere,
		"FIRESTORE_EMULATOR_HOST="+nowhere,
		"PUBSUB_EMULATOR_HOST="+nowhere,
		"CLOUD_TASKS_EMULATOR_HOST="+nowhere,
	)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	base := "http://127.0.0.1:" + port
	var resp *http.Response
	served := false
	defer func() {
		if !served {
			t.Logf("the server's output:\n%s", out)
		}
	}()
	wait.For(t, "the server serving", func() (bool, string) {
		resp, err = http.Get(base + "/")
		if err == nil {
			return true, ""
		}
		select {
		case err := <-exited:
			t.Fatalf("server exited: %v", err)
		default:
		}
		return false, err.Error()
	})
	served = true
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost || !strings.Contains(string(body), `"INVALID_INPUT"`) {
		t.Errorf("GET / = %d Allow=%q %s, want 405 INVALID_INPUT allowing POST", resp.StatusCode, resp.Header.Get("Allow"), body)
	}
	resp, err = http.Post(base+"/", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"UNAUTHENTICATED"`) {
		t.Errorf("POST / without a token = %d %s, want 401 UNAUTHENTICATED from the watchdog", resp.StatusCode, body)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("server after SIGTERM = %v, want a clean exit\n%s", err, out)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("server still running 30s after SIGTERM\n%s", out)
	}
}
