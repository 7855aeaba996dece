package logging_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/kubernetes/shared/logging"
)

func TestConsoleLine(t *testing.T) {
	var buf bytes.Buffer
	log := logging.NewConsole(&buf, slog.LevelInfo, false).With("requestId", "r1").WithGroup("call")
	log.Debug("Hidden")
	log.Info("Served request", "status", 200, "path", "/api/compute/x", "took", 1500*time.Millisecond, slog.Group("who", "principal", "alice"))
	log.Warn("Retrying", "error", errors.New("connection refused: dial tcp"), "empty", "")
	log.Error("Panic serving request", "stack", "goroutine 1:\nmain.main()\n\t/build/main.go:3")
	got := buf.String()
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	want := []string{
		` INFO  Served request requestId=r1 call.status=200 call.path=/api/compute/x call.took=1.5s call.who.principal=alice`,
		` WARN  Retrying requestId=r1 call.error="connection refused: dial tcp" call.empty=""`,
		` ERROR Panic serving request requestId=r1`,
		`    call.stack:`,
		`    goroutine 1:`,
		`    main.main()`,
		"    \t/build/main.go:3",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), got)
	}
	for i, w := range want {
		l := lines[i]
		if strings.HasPrefix(w, " ") && !strings.HasPrefix(w, "    ") {
			// The line starts with the time: 15:04:05.000.
			if len(l) < 12 || l[2] != ':' || l[5] != ':' || l[8] != '.' {
				t.Errorf("line %d = %q, want it to start with the time", i, l)
				continue
			}
			l = l[12:]
		}
		if l != w {
			t.Errorf("line %d = %q, want %q", i, l, w)
		}
	}
	if strings.Contains(got, "{") || strings.Contains(got, ".go:") && !strings.Contains(got, "/build/main.go:3") {
		t.Errorf("console output looks like JSON or carries source locations:\n%s", got)
	}
}

func TestConsoleColorAndConcurrency(t *testing.T) {
	var buf bytes.Buffer
	log := logging.NewConsole(&buf, slog.LevelDebug, true)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log.Info("Line", "i", i)
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 20 {
		t.Fatalf("got %d lines, want 20", len(lines))
	}
	for _, l := range lines {
		if !strings.Contains(l, "\x1b[34mINFO") || !strings.HasSuffix(l, "Line i="+l[strings.LastIndex(l, "=")+1:]) {
			t.Errorf("line %q: want a blue INFO and whole lines", l)
		}
	}
}

// A console line holds each key once, the last value winning.
func TestConsoleKeysUnique(t *testing.T) {
	var buf bytes.Buffer
	log := logging.NewConsole(&buf, slog.LevelInfo, false).With("function", "a", "n", 1).With("function", "b")
	log.Info("m", "function", "c", slog.Group("", "n", 2))
	log.WithGroup("g").With("k", 1).With("k", 2).Info("m", "k", 3, "j", 4)
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	want := []string{" INFO  m function=c n=2", " INFO  m function=b n=1 g.k=3 g.j=4"}
	if len(lines) != len(want) {
		t.Fatalf("got %q, want %d lines", lines, len(want))
	}
	for i, w := range want {
		if len(lines[i]) < 12 || lines[i][12:] != w {
			t.Errorf("line %d = %q, want %q after the time", i, lines[i], w)
		}
	}
}
