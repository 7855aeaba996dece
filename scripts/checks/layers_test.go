package checks

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// layerModule is the module whose imports TestImportsRunOneWay reads.
const layerModule = "github.com/better-compute/kubernetes"

// layerTable is every package of shared/ and functions/ in its layer, from
// the top: ARCHITECTURE.md's Layers (functions and the edge packages, the
// domain, the store, the clients), made finer. A package imports, in its
// code and in its tests, only packages of the layers below its own, of its
// own layer only where layerSideways says why, and of a layer above only
// in its tests and where layerTestsUp says why. A name ending in "/..."
// holds every package under it.
var layerTable = []struct {
	name string
	pkgs []string
}{
	// The binaries: flags and the environment are read here, and nowhere
	// below.
	{"commands", []string{
		"functions/cmd/bc", "functions/cmd/devstack", "functions/cmd/seed", "functions/cmd/server",
		"functions/cmd/terraform-provider-bettercompute", "functions/cmd/terraform-provider-bettercompute/provider",
		"functions/cmd/terraform-provider-bettercompute/acceptance",
	}},
	// The product on the emulators, in one process or N.
	{"dev stack", []string{"functions/devstack"}},
	// The composition root: builds every handler from a Config value.
	{"composition root", []string{"functions/cloudrun"}},
	// The HTTP, task and CloudEvent handlers: decode, authenticate, call
	// the domain or the store, answer.
	{"handlers", []string{
		"functions/api", "functions/reconcile", "functions/poolevents", "functions/devstack/console",
	}},
	// The Go client of the public API, held to the documents by its tests.
	{"client", []string{"shared/client"}},
	// The OpenAPI and AsyncAPI documents, made from what the edge decodes
	// and the resources it answers.
	{"documents", []string{"shared/apidoc", "shared/apidoc/apidoctest"}},
	// What every handler shares: strict decoding and validation (input),
	// the HTTP envelope (httpapi), the devstack's OIDC issuer.
	{"edge libraries", []string{"shared/httpapi", "shared/input", "shared/auth/devissuer"}},
	// The domain's planners and their runs, and the join of a node to its
	// substrate.
	{"domain", []string{"shared/clusters", "shared/substrates", "shared/join"}},
	// The domain's rules: the state machine and every decision, pure
	// functions over model's values. The store applies the ones its
	// transactions need as store.Rules, which lifecycle.Rules implements:
	// it is handed them, and never imports them.
	{"rules", []string{"shared/lifecycle"}},
	// Every Firestore path and transaction (store), the chains that run a
	// subject (chain) and their queue (tasks), the outbox's relay.
	{"store", []string{"shared/store", "shared/chain", "shared/outbox", "shared/tasks"}},
	// The documents of the data model, and the domain's own event type,
	// which the rules make, the store writes with the change it announces
	// and the outbox relays: plain values, no rule, no I/O.
	{"model", []string{"shared/model", "shared/event"}},
	// The clients of other services: the identity provider's tokens and
	// the one authorizer (auth, which the store applies to the grants it
	// reads in the transaction that acts on them, ARCHITECTURE.md's rules
	// 2 and 3), IAM Credentials, a cluster's Kubernetes API, OpenTelemetry.
	{"clients", []string{
		"shared/auth", "shared/impersonate", "shared/kubeapply", "shared/telemetry", "shared/telemetry/telemetrytest",
	}},
	// The words everything above speaks: the public resources, the error
	// vocabulary, logging, test waits.
	{"vocabulary", []string{"shared/resource", "shared/errs", "shared/logging", "shared/wait"}},
	// The simulated services. They import nothing of the product
	// (emulators_test.go, beside this file, holds it), so anything may
	// use them in tests.
	{"emulators", []string{"emulators/..."}},
}

// layerSideways are the imports allowed within a layer, each with its
// reason. Any other import within a layer is refused, as is any import of
// a layer above.
var layerSideways = map[[2]string]string{
	{"shared/apidoc/apidoctest", "shared/apidoc"}:          "the test helper validates against the documents of its parent",
	{"shared/apidoc", "shared/apidoc/apidoctest"}:          "the documents' tests validate samples through their test helper",
	{"shared/join", "shared/substrates"}:                   "a node joins a substrate: its names, its token hash and its Kubernetes connection are the substrate's",
	{"shared/store", "shared/chain"}:                       "the store's transactions restart and save the chains of the subjects it holds",
	{"shared/store", "shared/outbox"}:                      "the store writes the events of a transaction to the outbox in that transaction",
	{"shared/chain", "shared/outbox"}:                      "the watchdog's tests drain the outbox through a real relay",
	{"shared/chain", "shared/store"}:                       "the chain's tests keep their chains in the store, its Storage",
	{"shared/outbox", "shared/store"}:                      "the relay's tests keep the outbox in the store, its Store",
	{"shared/tasks", "shared/store"}:                       "the queue's tests run chains kept in the store",
	{"shared/tasks", "shared/chain"}:                       "the Cloud Tasks queue carries chain.Kicks (chain.Kicker)",
	{"shared/telemetry/telemetrytest", "shared/telemetry"}: "the test reader collects what its parent exports",
	{"shared/telemetry", "shared/telemetry/telemetrytest"}: "the exporter's tests read it through the test reader",
	{"shared/auth/devissuer", "shared/httpapi"}:            "the issuer's endpoints read and answer through the edge's HTTP helpers",
	{"functions/cmd/terraform-provider-bettercompute", "functions/cmd/terraform-provider-bettercompute/provider"}:            "the plugin binary serves the provider its package holds",
	{"functions/cmd/terraform-provider-bettercompute/acceptance", "functions/cmd/terraform-provider-bettercompute/provider"}: "the acceptance test serves the provider in its own process for the real OpenTofu",
}

// layerTestsUp are the imports of a layer above allowed in tests only,
// each with its reason.
var layerTestsUp = map[[2]string]string{
	{"shared/store", "shared/lifecycle"}:  "the store's tests run its transactions under the product's rules",
	{"shared/chain", "shared/lifecycle"}:  "the chain's tests keep their chains in a store, built with the product's rules",
	{"shared/outbox", "shared/lifecycle"}: "the relay's tests keep the outbox in a store, built with the product's rules",
	{"shared/tasks", "shared/lifecycle"}:  "the queue's tests run chains kept in a store, built with the product's rules",
}

// TestImportsRunOneWay holds the layering of layerTable: it lists every
// package of shared/ and functions/ with the imports of its code and of
// its tests, and names every package missing from the table and every
// import that runs upward or sideways without a reason.
func TestImportsRunOneWay(t *testing.T) {
	layerOf := map[string]int{}
	var prefixes []string
	for i, l := range layerTable {
		for _, p := range l.pkgs {
			if _, dup := layerOf[p]; dup {
				t.Errorf("layerTable holds %s twice", p)
			}
			layerOf[p] = i
			if dir, ok := strings.CutSuffix(p, "/..."); ok {
				prefixes = append(prefixes, dir)
			}
		}
	}
	layer := func(p string) (int, bool) {
		if i, ok := layerOf[p]; ok {
			return i, true
		}
		for _, dir := range prefixes {
			if strings.HasPrefix(p, dir+"/") {
				return layerOf[dir+"/..."], true
			}
		}
		return 0, false
	}
	listed := goListPackages(t, "ImportPath,Imports,TestImports,XTestImports", "./shared/...", "./functions/...")
	if len(listed) == 0 {
		t.Fatal("go list named no package of shared/ or functions/")
	}
	seen := map[string]bool{}
	var problems []string
	used, usedUp := map[[2]string]bool{}, map[[2]string]bool{}
	for _, p := range listed {
		from := strings.TrimPrefix(p.ImportPath, layerModule+"/")
		seen[from] = true
		fl, ok := layer(from)
		if !ok {
			problems = append(problems, from+": in no layer of layerTable")
			continue
		}
		imports := map[string]string{}
		for _, group := range []struct {
			what string
			list []string
		}{{"imports", p.Imports}, {"its tests import", p.TestImports}, {"its tests import", p.XTestImports}} {
			for _, imp := range group.list {
				to, ok := strings.CutPrefix(imp, layerModule+"/")
				if !ok || to == from {
					continue
				}
				if _, done := imports[to]; !done {
					imports[to] = group.what
				}
			}
		}
		for _, to := range slices.Sorted(maps.Keys(imports)) {
			tl, ok := layer(to)
			switch {
			case !ok:
				problems = append(problems, from+" "+imports[to]+" "+to+", which is in no layer of layerTable")
			case tl < fl && imports[to] != "imports" && layerTestsUp[[2]string{from, to}] != "":
				usedUp[[2]string{from, to}] = true
			case tl < fl:
				problems = append(problems, from+" ("+layerTable[fl].name+") "+imports[to]+" "+to+" ("+layerTable[tl].name+"): upward")
			case tl == fl && layerSideways[[2]string{from, to}] == "":
				problems = append(problems, from+" "+imports[to]+" "+to+": sideways within "+layerTable[fl].name+", with no reason in layerSideways")
			case tl == fl:
				used[[2]string{from, to}] = true
			}
		}
	}
	for p := range layerOf {
		if !strings.HasSuffix(p, "/...") && !seen[p] {
			problems = append(problems, p+": in layerTable, but no such package")
		}
	}
	for edge := range layerSideways {
		if !used[edge] {
			problems = append(problems, edge[0]+" -> "+edge[1]+": in layerSideways, but no such import")
		}
	}
	for edge := range layerTestsUp {
		if !usedUp[edge] {
			problems = append(problems, edge[0]+" -> "+edge[1]+": in layerTestsUp, but no such import of its tests")
		}
	}
	slices.Sort(problems)
	for _, p := range problems {
		t.Error(p)
	}
}
