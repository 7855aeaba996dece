// Command bc is the command line of the Better Compute Kubernetes API,
// on the Go client (shared/client):
//
//	bc login --dev --tenant acme          # a token from the devstack
//	bc clusters create --name prod --pool pool-dev --region us-central1 \
//	    --node-pool name=default,machine-type=e2-standard-4,nodes=1 --wait
//	bc nodepools create --cluster kcl_... --name gpu --machine-type g2-standard-8 --nodes 2 --wait
//	bc nodepools list --cluster kcl_... -o yaml
//	bc events tail --cluster kcl_...
//
// It follows gcloud's and kubectl's conventions: --output table|json|yaml,
// the tenant, URL and token from flags, then the environment (BC_TENANT,
// BC_URL, BC_TOKEN), then the config file (BC_CONFIG, or config.yaml in
// the user's config directory under bc/, ~/.config on Linux), written by
// bc login; errors on stderr naming the flag of each broken field; exit
// codes a script can test (bc help exit-codes). --wait prints each state
// change with the time since the call and ends non-zero when the resource
// fails.
//
// Commands: clusters create|get|list|delete, nodepools
// create|list|update|delete, substrates get|list|nodes|plan, events tail,
// login, config. The config file is written with mode 0600. A refused
// input names each field by its flag (--nodes (nodeCount): must be between
// 0 and 1000). Exit codes: 0 success, 1 other failure, 2 usage, 3
// INVALID_INPUT, 4 NOT_FOUND, 5 CONFLICT or INVALID_STATE, 6
// UNAUTHENTICATED or PERMISSION_DENIED, 7 QUOTA_EXCEEDED or UNSUPPORTED, 8
// UNAVAILABLE or INTERNAL, 9 --wait saw the resource fail, 10 --wait timed
// out. --wait prints each state change on stderr with the time since the
// call (on a terminal, a last line counts the seconds meanwhile):
//
//	[   0.0s] node pool gpu: pending
//	[   3.1s] node pool gpu: error (Node pool "gpu": invalid machine type "e2-nonexistent": no such machine type.)
//	error: node pool gpu (knp_01jd...) failed: Node pool "gpu": invalid machine type "e2-nonexistent": no such machine type.
//
// bc events tail makes a subscription per event type (filtered on
// --cluster, removed when it stops) on the devstack's Pub/Sub emulator
// after bc login --dev, or on Google Cloud Pub/Sub in --project. Since
// many instances publish, Pub/Sub's ordering key alone does not order a
// cluster's events; tail prints them in ce-sequence order, each once
// (client.Orderer), holding an event up to --order-wait (5 s) for its
// predecessor and noting on stderr a gap that persists.
//
// It sits beside the other commands in functions/cmd, but unlike server it
// is never deployed: it is a tool for the API's users, built and installed
// on their machines (go install .../functions/cmd/bc).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
