// Command devstack runs the whole system on this machine with no cloud
// account (API.md §8): go run ./functions/cmd/devstack. Its flags are
// devstack.Command's. Run with devstack.InstanceArg it is the deployed
// server instead (cloudrun.Main): the processes of -instances.
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/better-compute/kubernetes/functions/cloudrun"
	"github.com/better-compute/kubernetes/functions/devstack"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == devstack.InstanceArg {
		// An instance of -instances: the deployed server, configured by
		// its environment alone.
		os.Exit(cloudrun.Main())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := devstack.Command(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		os.Exit(1)
	}
}
