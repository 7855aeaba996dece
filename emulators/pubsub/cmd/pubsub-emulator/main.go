// Command pubsub-emulator serves the Pub/Sub emulator on a TCP address
// until SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/better-compute/kubernetes/emulators/pubsub"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8085", "address to listen on")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(*addr, log); err != nil {
		log.Error("Pub/Sub emulator failed", "err", err)
		os.Exit(1)
	}
}

func run(addr string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := pubsub.NewServer(addr)
	if err != nil {
		return fmt.Errorf("start emulator: %w", err)
	}
	defer srv.Close()
	log.Info("Serving Pub/Sub emulator", "addr", srv.Addr)
	<-ctx.Done()
	log.Info("Shutting down Pub/Sub emulator")
	return nil
}
