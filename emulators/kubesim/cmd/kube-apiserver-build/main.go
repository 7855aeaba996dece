// Command kube-apiserver-build builds the Kubernetes API server that the
// devstack and the tests give simulated clusters (emulators/kubeapiserver),
// into the user's cache directory, unless it is there already, and prints
// its path. CI runs it before the tests, so that the build's minutes are
// not spent inside a test's time limit.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/better-compute/kubernetes/emulators/kubesim"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	path, err := kubesim.Binary(context.Background(), log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube-apiserver-build:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}
