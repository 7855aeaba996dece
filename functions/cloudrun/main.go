package cloudrun

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	"github.com/better-compute/kubernetes/shared/logging"
)

// shutdownGrace stays within the 10 s Cloud Run allows after SIGTERM.
const shutdownGrace = 8 * time.Second

// Main is the server command (functions/cmd/server): it serves the
// functions with the Functions Framework on PORT (8080 when unset),
// configured from the process's environment only (LoadConfig), until
// SIGTERM or SIGINT, and returns the process's exit status. It lives
// here, not in the command, so that the devstack can run the very same
// server as processes of its own binary (-instances), wherever that
// binary was built.
//
// Main is the one place that reads the server's environment: it hands
// os.LookupEnv to serve, and everything after reads only what it is
// given (LoadConfig for the functions' Config, then PORT). The Functions
// Framework, which Main starts, reads its own variables as it does on
// Cloud Run (FUNCTION_TARGET, K_SERVICE).
func Main() int {
	return serve(os.LookupEnv)
}

// serve is Main over the environment lookup gives.
func serve(lookup func(string) (string, bool)) int {
	log := logging.New(os.Stdout, slog.LevelInfo)
	env := func(name string) string { v, _ := lookup(name); return v }
	target := env("FUNCTION_TARGET")
	cfg, err := LoadConfig(lookup)
	if err != nil {
		log.Error("Refusing to start: the configuration is invalid", "error", err, "target", target)
		return 1
	}
	app, err := New(cfg, Options{})
	if err != nil {
		log.Error("Refusing to start: the configuration is invalid", "error", err, "target", target)
		return 1
	}
	Register(app)
	port := env("PORT")
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
		return 1
	case <-ctx.Done():
	}
	log.Info("Shutting down: finishing requests and publishing queued events")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := app.Shutdown(sctx); err != nil {
		log.Warn("Shutdown incomplete; unpublished events stay in the outbox for the watchdog", "error", err)
	}
	return 0
}
