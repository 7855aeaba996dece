// Command kube-apiserver is the Kubernetes API server built from the
// Kubernetes source at the version pinned in go.mod, with its etcd embedded,
// so that the devstack and the tests can give a simulated cluster a real
// Kubernetes API (server-side apply, field ownership, conflicts) without
// downloading a prebuilt binary.
//
// It lives in a module of its own so that k8s.io/kubernetes never enters the
// product's go.mod. Every argument is passed to kube-apiserver unchanged,
// except --embedded-etcd-dir, where the embedded etcd keeps its data; the
// binary adds --etcd-servers pointing at that etcd.
//
// Only the API server runs: no controller manager, scheduler or kubelet. The
// GKE simulator does the little of their work that its users rely on, and
// says which in its package comment.
package main

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	dir, args := etcdDir(os.Args[1:])
	if dir == "" {
		fmt.Fprintln(os.Stderr, "kube-apiserver: --embedded-etcd-dir is required")
		os.Exit(2)
	}
	clientURL, stop, err := startEtcd(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube-apiserver: start etcd: %v\n", err)
		os.Exit(1)
	}
	defer stop()

	cmd := app.NewAPIServerCommand()
	cmd.SetArgs(append(args, "--etcd-servers="+clientURL))
	os.Exit(cli.Run(cmd))
}

// etcdDir takes --embedded-etcd-dir out of args.
func etcdDir(args []string) (string, []string) {
	var dir string
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "--embedded-etcd-dir="):
			dir = strings.TrimPrefix(a, "--embedded-etcd-dir=")
		case a == "--embedded-etcd-dir" && i+1 < len(args):
			dir = args[i+1]
			i++
		default:
			rest = append(rest, a)
		}
	}
	return dir, rest
}

// startEtcd starts a single-member etcd on free loopback ports.
func startEtcd(dir string) (string, func(), error) {
	client, err := freeURL()
	if err != nil {
		return "", nil, err
	}
	peer, err := freeURL()
	if err != nil {
		return "", nil, err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return "", nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return "", nil, fmt.Errorf("etcd not ready after 60s")
	}
	return client.String(), e.Close, nil
}

func freeURL() (*url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return &url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}
