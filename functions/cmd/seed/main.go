// Command seed writes provider accounts, provider pools, role bindings and
// tenants' quotas (the devstack seed format, API.md §8 and §10) to a
// Firestore database: the production path for the documents the API reads
// but never writes. A tenant's entry replaces its quota and counts its
// clusters that are not deleted; a tenant the file does not name keeps
// what it has.
//
//	go run ./functions/cmd/seed -project my-project -file seed.json
//
// With FIRESTORE_EMULATOR_HOST set it writes to that emulator instead.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"cloud.google.com/go/firestore"

	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/store"
)

func main() {
	project := flag.String("project", os.Getenv("GOOGLE_CLOUD_PROJECT"), "Google Cloud project of the Firestore database")
	database := flag.String("database", firestore.DefaultDatabaseID, "Firestore database ID")
	file := flag.String("file", "", "seed file (accounts, pools, roleBindings, tenants)")
	flag.Parse()
	log := logging.New(os.Stdout, slog.LevelInfo)
	if err := run(*project, *database, *file); err != nil {
		log.Error("Seeding failed", "error", err)
		os.Exit(1)
	}
	log.Info("Seeded", "project", *project, "database", *database, "file", *file)
}

func run(project, database, file string) error {
	if project == "" || file == "" {
		return fmt.Errorf("-project and -file are required")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	seed, err := store.ParseSeed(b, lifecycle.Rules{})
	if err != nil {
		return err
	}
	ctx := context.Background()
	fs, err := firestore.NewClientWithDatabase(ctx, project, database)
	if err != nil {
		return fmt.Errorf("firestore client: %w", err)
	}
	defer fs.Close()
	s, err := store.New(fs, lifecycle.Rules{})
	if err != nil {
		return err
	}
	return s.LoadSeed(ctx, seed)
}
