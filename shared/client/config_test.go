package client_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/client"
)

// TestConfigFile checks the config file bc login writes and bc and the
// provider read: a round trip, private to its owner; a missing file is an
// empty config; an unknown key is refused; BC_CONFIG names the file.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "config.yaml")
	want := client.Config{URL: "http://127.0.0.1:8080", Token: "t", Tenant: "acme", Project: "p", PubSubEmulatorHost: "localhost:8085"}
	if err := client.SaveConfig(path, want); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("config file: %v, %v; want mode 0600", fi, err)
	}
	if got, err := client.LoadConfig(path); err != nil || got != want {
		t.Errorf("LoadConfig = %+v, %v; want %+v", got, err, want)
	}
	if got, err := client.LoadConfig(filepath.Join(dir, "none.yaml")); err != nil || got != (client.Config{}) {
		t.Errorf("LoadConfig(missing) = %+v, %v; want an empty config", got, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("url: x\nnope: y\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := client.LoadConfig(bad); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("LoadConfig(unknown key) = %v, want an error naming it", err)
	}
	env := map[string]string{client.ConfigEnv: path}
	if got, err := client.ConfigPath(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil || got != path {
		t.Errorf("ConfigPath with BC_CONFIG = %q, %v; want %q", got, err, path)
	}
	got, err := client.ConfigPath(func(string) (string, bool) { return "", false })
	if err == nil && !strings.HasSuffix(got, filepath.Join("bc", "config.yaml")) {
		t.Errorf("ConfigPath = %q, want bc/config.yaml in the user's config directory", got)
	}
}
