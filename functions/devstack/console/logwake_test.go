package console_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/functions/devstack/console"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/model"
	"github.com/better-compute/kubernetes/shared/resource"
	"github.com/better-compute/kubernetes/shared/store"
	"github.com/better-compute/kubernetes/shared/wait"
)

// TestLogTapJSON feeds the tap the lines an instance writes
// (shared/logging's JSON): its warnings are kept as the process's own
// records are, and told to OnNote; info and other lines are not.
func TestLogTapJSON(t *testing.T) {
	var out bytes.Buffer
	log := logging.New(&out, slog.LevelInfo)
	log.With("kind", "clusters", "tenantId", "acme", "id", "kcl-9").Warn("Reconcile run failed; retrying with backoff", "error", errors.New("quota"))
	log.With("substrateId", "ksb-9").Info("Substrate run began")
	log.WithGroup("g").Warn("elsewhere", "substrateId", "ksb-8")
	tap := console.NewLogTap()
	var noted []string
	stop := tap.OnNote(func(kind, tenant, id string) { noted = append(noted, kind+" "+tenant+" "+id) })
	defer stop()
	for _, l := range append(bytes.Split(out.Bytes(), []byte("\n")), []byte("Serving function: x"), []byte(`{"not":"a record"`)) {
		tap.NoteJSON(l)
	}
	if l, ok := tap.Last("cluster", "kcl-9"); !ok || l.Err != "quota" || l.Message != "Reconcile run failed; retrying with backoff" || time.Since(l.At) > time.Minute {
		t.Errorf("Last(cluster, kcl-9) = %+v, %v; want its warning", l, ok)
	}
	for _, id := range []string{"ksb-9", "ksb-8"} {
		if l, ok := tap.Last("substrate", id); ok {
			t.Errorf("Last(substrate, %s) = %+v: an info line or a group's attribute kept", id, l)
		}
	}
	if want := []string{"cluster acme kcl-9"}; fmt.Sprint(noted) != fmt.Sprint(want) {
		t.Errorf("noted %q, want %q", noted, want)
	}
}

// TestLoggedReasonWakesStreams opens a failing substrate's page and a
// not-ready cluster's, then logs why each fails, changing no document:
// each open page shows its reason at once, woken by the log's line (the
// cluster's as an instance writes it), not by a change or a timer.
func TestLoggedReasonWakesStreams(t *testing.T) {
	fsc := fsemu.ForTest(t, "bc-dev")
	ctx := context.Background()
	now := time.Now()
	acme := store.TenantDoc(fsc, "acme")
	cl := model.Cluster{ID: "kcl-w", TenantID: "acme", CreatedAt: now.Add(-time.Minute), Active: true,
		Spec:   model.ClusterSpec{Name: "bc-w", Mode: resource.ModeStandard, Region: "us-central1", Project: "bc-dev", ProviderName: "bc-w", Generation: 1},
		Status: model.ClusterStatus{State: resource.StateProvisioning, ObservedGeneration: 1}}
	sb := model.Substrate{ID: "ksb-w", TenantID: "acme", PoolID: "pool-w", CreatedAt: now.Add(-time.Minute), Active: true,
		Spec: model.SubstrateSpec{Mode: resource.SubstrateCreate},
		Status: model.SubstrateStatus{State: resource.StateProvisioning, ClusterID: "kcl-w",
			Retrying: &model.Retry{Since: now.Add(-10 * time.Second), Reason: "Better Compute's run of the substrate failed; it is retried"}}}
	if _, err := acme.Collection("clusters").Doc("kcl-w").Set(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if _, err := acme.Collection("substrates").Doc("ksb-w").Set(ctx, sb); err != nil {
		t.Fatal(err)
	}
	tap := console.NewLogTap()
	c := newConsole(t, fsc, 0, func(o *console.Options) { o.Logs = tap; o.Poll = 400 * time.Millisecond })
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	subLive, clLive := make(chan string, 16), make(chan string, 16)
	openLive(t, srv.URL+"/console/substrates/acme/ksb-w/stream", subLive)
	openLive(t, srv.URL+"/console/clusters/acme/kcl-w/stream", clLive)
	for _, first := range []string{<-subLive, <-clLive} {
		if strings.Contains(first, "no endpoint") || strings.Contains(first, "CreateCluster refused") {
			t.Fatalf("a reason shown before it was logged:\n%s", first)
		}
	}
	log := slog.New(tap.Handler(slog.NewTextHandler(&bytes.Buffer{}, nil)))
	log.With("kind", "substrates", "tenantId", "acme", "id", "ksb-w", "substrateId", "ksb-w").
		Warn("Substrate run failed; retrying with backoff", "error", "cluster kcl-w has no endpoint or CA yet")
	var line bytes.Buffer
	logging.New(&line, slog.LevelInfo).With("kind", "clusters", "tenantId", "acme", "id", "kcl-w").
		Warn("Reconcile run failed; retrying with backoff", "error", "CreateCluster refused: UNAVAILABLE")
	tap.NoteJSON(bytes.TrimSpace(line.Bytes()))
	for _, p := range []struct {
		what string
		live chan string
		want []string
	}{
		{"the substrate's page", subLive, []string{"The log says:", "cluster kcl-w has no endpoint or CA yet"}},
		{"the cluster's page", clLive, []string{`id="cluster-logged"`, "CreateCluster refused: UNAVAILABLE", "cluster kcl-w has no endpoint or CA yet"}},
	} {
		last := ""
		wait.Within(t, 10*time.Second, p.what+" with the log's reason", func() (bool, string) {
			for {
				select {
				case h := <-p.live:
					last = h
				default:
					for _, s := range p.want {
						if !strings.Contains(last, s) {
							return false, fmt.Sprintf("lacks %q: %.1500s", s, last)
						}
					}
					return true, ""
				}
			}
		})
	}
}
