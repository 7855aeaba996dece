// Command firestore-emulator serves the Firestore emulator on a TCP address
// until SIGINT or SIGTERM. With -data, it loads documents from the file at
// start (if it exists) and writes them back on shutdown.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/better-compute/kubernetes/emulators/firestore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8086", "address to listen on")
	data := flag.String("data", "", "file to import documents from at start and export them to on shutdown")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(*addr, *data, log); err != nil {
		log.Error("Firestore emulator failed", "err", err)
		os.Exit(1)
	}
}

func run(addr, data string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := firestore.NewServer(firestore.WithAddr(addr))
	if err != nil {
		return fmt.Errorf("start emulator: %w", err)
	}
	defer srv.Close()
	if data != "" {
		if err := load(srv, data); err != nil {
			return err
		}
		log.Info("Loaded documents", "file", data)
	}
	log.Info("Serving Firestore emulator", "addr", srv.Addr)
	<-ctx.Done()
	log.Info("Shutting down Firestore emulator")
	if data != "" {
		if err := save(srv, data); err != nil {
			return err
		}
		log.Info("Saved documents", "file", data)
	}
	return nil
}

func load(srv *firestore.Server, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open data file: %w", err)
	}
	defer f.Close()
	if err := srv.Import(f); err != nil {
		return fmt.Errorf("import %s: %w", path, err)
	}
	return nil
}

// save writes to a temporary file first so a crash never leaves a torn file.
func save(srv *firestore.Server, path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("create data file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := srv.Export(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("export to %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write data file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace data file: %w", err)
	}
	return nil
}
