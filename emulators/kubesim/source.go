package kubesim

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// A copy of emulators/kubeapiserver's files, so that a devstack or test
// binary built with go build or go install, and started outside the
// repository, can build the API server: a package cannot embed the files
// of another module, which that directory is (so that k8s.io/kubernetes
// stays out of this one), hence the copy, under names the go command
// ignores. TestEmbeddedSource fails when it differs from the module.
//
//go:generate cp ../kubeapiserver/main.go apiserver-src/main.go.txt
//go:generate cp ../kubeapiserver/go.mod apiserver-src/go.mod.txt
//go:generate cp ../kubeapiserver/go.sum apiserver-src/go.sum.txt
//go:embed apiserver-src/main.go.txt apiserver-src/go.mod.txt apiserver-src/go.sum.txt
var embedded embed.FS

// sourceFiles are the files of emulators/kubeapiserver that decide the
// binary; with the Go version they name it, so that a change to any of them
// builds a new one beside the old.
var sourceFiles = []string{"go.mod", "go.sum", "main.go"}

// source is the module that Binary builds: its files, and the directory
// that holds them, or "" for the copy embedded in this package, which a
// build writes out first.
type source struct {
	files map[string][]byte
	dir   string
}

// dirSource reads the module in dir.
func dirSource(dir string) (source, error) {
	s := source{files: map[string][]byte{}, dir: dir}
	for _, name := range sourceFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return source{}, fmt.Errorf("kubesim: read the API server's source: %w", err)
		}
		s.files[name] = b
	}
	return s, nil
}

// embeddedSource is the copy of the module embedded in this package.
func embeddedSource() source {
	s := source{files: map[string][]byte{}}
	for _, name := range sourceFiles {
		b, err := embedded.ReadFile("apiserver-src/" + name + ".txt")
		if err != nil {
			panic(fmt.Sprintf("kubesim: embedded source %s: %v", name, err)) // the embed directive names them all
		}
		s.files[name] = b
	}
	return s
}

// hash is the first 12 hex digits of the SHA-256 over the files that
// decide the binary and the Go version.
func (s source) hash() string {
	h := sha256.New()
	for _, name := range sourceFiles {
		h.Write(s.files[name])
	}
	h.Write([]byte(runtime.Version()))
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// materialize returns the directory of the module, writing the embedded
// copy out first into dir/name when it has none there: through a
// temporary directory and a rename, so that name is only ever whole. The
// caller holds the build's lock.
func (s source) materialize(dir, name string) (string, error) {
	if s.dir != "" {
		return s.dir, nil
	}
	target := filepath.Join(dir, name)
	if have, err := dirSource(target); err == nil && have.same(s) {
		return target, nil
	}
	tmp, err := os.MkdirTemp(dir, name+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("kubesim: write the API server's source: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	for _, f := range sourceFiles {
		if err := os.WriteFile(filepath.Join(tmp, f), s.files[f], 0o644); err != nil {
			return "", fmt.Errorf("kubesim: write the API server's source: %w", err)
		}
	}
	// Left by an interrupted or older write: its files differ.
	if err := os.RemoveAll(target); err != nil {
		return "", fmt.Errorf("kubesim: %w", err)
	}
	if err := os.Rename(tmp, target); err != nil {
		return "", fmt.Errorf("kubesim: write the API server's source: %w", err)
	}
	return target, nil
}

func (s source) same(o source) bool {
	for _, name := range sourceFiles {
		if !bytes.Equal(s.files[name], o.files[name]) {
			return false
		}
	}
	return true
}
