// Command terraform-provider-bettercompute is the OpenTofu (and Terraform)
// provider of the Better Compute Kubernetes API: clusters and node pools as
// resources, a cluster, its node pools and a substrate as data sources.
// OpenTofu starts it as a plugin; -debug serves it for a debugger and prints
// the TF_REATTACH_PROVIDERS to give tofu instead.
//
// Its configuration comes from the provider block, else the environment
// (BC_URL, BC_TENANT, BC_TOKEN, BC_CONFIG), else bc login's config file, as
// bc reads them (docs/index.md).
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/better-compute/kubernetes/functions/cmd/terraform-provider-bettercompute/provider"
)

// Address is the provider's source address in the OpenTofu registry.
const Address = "registry.opentofu.org/better-compute/bettercompute"

// version is set by the release build (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "serve for a debugger: print TF_REATTACH_PROVIDERS instead of being started by tofu")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: Address,
		Debug:   *debug,
	})
	if err != nil {
		slog.Error("serve the provider", "err", err)
		os.Exit(1)
	}
}
