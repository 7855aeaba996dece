// Command devstack runs the whole system on this machine with no cloud
// account (API.md §8): go run ./functions/cmd/devstack. Its flags are
// devstack.Command's.
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/better-compute/kubernetes/functions/devstack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := devstack.Command(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		os.Exit(1)
	}
}
