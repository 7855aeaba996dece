// Command server is the entry point of the project's container image on
// Cloud Run: it serves the functions registered by package cloudrun with
// the Functions Framework on PORT (8080 when unset). FUNCTION_TARGET picks
// the one function a service runs; without it every function is served on
// /<name>, which is how to run them all locally (against the emulators,
// see cloudrun.Config).
//
// It reads nothing itself: cloudrun.Main is the one place that reads the
// server's environment (cloudrun.LoadConfig, then PORT), here and in the
// devstack's -instances processes alike, before the port opens, so a
// revision with a broken environment fails to start with the reason in
// its logs. On SIGTERM (Cloud Run's notice before stopping an instance)
// requests in flight finish and queued events are published before the
// process exits.
package main

import (
	"os"

	"github.com/better-compute/kubernetes/functions/cloudrun"
)

func main() {
	os.Exit(cloudrun.Main())
}
