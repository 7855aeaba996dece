// Command server is the entry point of the project's container image on
// Cloud Run: it serves the functions registered by package cloudrun with
// the Functions Framework on PORT (8080 when unset). FUNCTION_TARGET picks
// the one function a service runs; without it every function is served on
// /<name>, which is how to run them all locally (against the emulators,
// see cloudrun.Config).
//
// The configuration is read from the environment here, and only here
// (cloudrun.LoadConfig), before the port opens, so a revision with a
// broken environment fails to start with the reason in its logs. On
// SIGTERM (Cloud Run's notice before stopping an instance) requests in
// flight finish and queued events are published before the process exits.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	"github.com/better-compute/kubernetes/functions/cloudrun"
	"github.com/better-compute/kubernetes/shared/logging"
)

// shutdownGrace stays within the 10 s Cloud Run allows after SIGTERM.
const shutdownGrace = 8 * time.Second

func main() {
	log := logging.New(os.Stdout, slog.LevelInfo)
	target := os.Getenv("FUNCTION_TARGET")
	cfg, err := cloudrun.LoadConfig(os.LookupEnv)
	if err != nil {
		log.Error("Refusing to start: the configuration is invalid", "error", err, "target", target)
		os.Exit(1)
	}
	app, err := cloudrun.New(cfg, cloudrun.Options{})
	if err != nil {
		log.Error("Refusing to start: the configuration is invalid", "error", err, "target", target)
		os.Exit(1)
	}
	cloudrun.Register(app)
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	served := make(chan error, 1)
	go func() { served <- funcframework.Start(port) }()
	log.Info("Serving functions", "port", port, "target", target)

	select {
	case err := <-served:
		log.Error("Server stopped", "error", err)
		os.Exit(1)
	case <-ctx.Done():
	}
	log.Info("Shutting down: finishing requests and publishing queued events")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := app.Shutdown(sctx); err != nil {
		log.Warn("Shutdown incomplete; unpublished events stay in the outbox for the watchdog", "error", err)
	}
}
