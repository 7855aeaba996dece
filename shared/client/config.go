package client

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// Config is what bc login keeps between runs in the config file, and what
// every other user of the API (the OpenTofu provider) reads from it: one
// file, one format, one place that reads it.
type Config struct {
	URL    string `json:"url,omitempty"`
	Token  string `json:"token,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	// Project is the Google Cloud project of the event topics.
	Project string `json:"project,omitempty"`
	// PubSubEmulatorHost, when set, is where events tail subscribes (the
	// devstack's Pub/Sub emulator) instead of Google Cloud Pub/Sub.
	PubSubEmulatorHost string `json:"pubsubEmulatorHost,omitempty"`
}

// ConfigEnv is the environment variable naming the config file.
const ConfigEnv = "BC_CONFIG"

// ConfigPath is the config file: BC_CONFIG as lookup reads it (the caller
// passes os.LookupEnv, or its own), or bc/config.yaml in the user's
// config directory.
func ConfigPath(lookup func(string) (string, bool)) (string, error) {
	if p, ok := lookup(ConfigEnv); ok && p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the config directory (set %s): %w", ConfigEnv, err)
	}
	return filepath.Join(dir, "bc", "config.yaml"), nil
}

// LoadConfig reads the config file; a missing one is an empty config.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// SaveConfig writes the config file, readable by its owner only (it
// holds a token).
func SaveConfig(path string, c Config) error {
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
