package console

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestLogTap logs through the tap as the runs do: the latest warning of
// a substrate (named by With) and of a cluster (by kind and id) is kept,
// info is not, and every record still reaches the log.
func TestLogTap(t *testing.T) {
	var out bytes.Buffer
	tap := NewLogTap()
	log := slog.New(tap.Handler(slog.NewTextHandler(&out, nil)))
	sub := log.With("kind", "substrates", "id", "ksb-1", "substrateId", "ksb-1")
	sub.Info("Substrate run began")
	if _, ok := tap.Last("substrate", "ksb-1"); ok {
		t.Errorf("an info line kept")
	}
	sub.Warn("Substrate run failed; retrying with backoff", "error", errors.New("cluster kcl-1 has no endpoint or CA yet"))
	log.With("kind", "clusters").Warn("Reconcile run failed; retrying with backoff", "id", "kcl-1", "error", "quota")
	log.WithGroup("g").Warn("elsewhere", "substrateId", "ksb-2")
	if l, ok := tap.Last("substrate", "ksb-1"); !ok || l.Err != "cluster kcl-1 has no endpoint or CA yet" {
		t.Errorf("Last(substrate, ksb-1) = %+v, %v; want its error", l, ok)
	}
	if l, ok := tap.Last("cluster", "kcl-1"); !ok || l.Err != "quota" {
		t.Errorf("Last(cluster, kcl-1) = %+v, %v; want its error", l, ok)
	}
	if _, ok := tap.Last("substrate", "ksb-2"); ok {
		t.Errorf("an attribute of a group taken for a resource's")
	}
	if n := strings.Count(out.String(), "\n"); n != 4 {
		t.Errorf("the log has %d lines, want 4:\n%s", n, out.String())
	}
	var none *LogTap
	if _, ok := none.Last("substrate", "ksb-1"); ok {
		t.Errorf("a nil tap has a line")
	}
}
