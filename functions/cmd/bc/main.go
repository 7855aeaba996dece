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
// the user's config directory under bc/), written by bc login; errors on
// stderr naming the flag of each broken field; exit codes a script can
// test (bc help exit-codes). --wait prints each state change with the
// time since the call and ends non-zero when the resource fails.
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
