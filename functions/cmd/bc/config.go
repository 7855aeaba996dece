package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"sigs.k8s.io/yaml"
)

// config is what bc keeps between runs, in the config file.
type config struct {
	URL    string `json:"url,omitempty"`
	Token  string `json:"token,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	// Project is the Google Cloud project of the event topics.
	Project string `json:"project,omitempty"`
	// PubSubEmulatorHost, when set, is where events tail subscribes (the
	// devstack's Pub/Sub emulator) instead of Google Cloud Pub/Sub.
	PubSubEmulatorHost string `json:"pubsubEmulatorHost,omitempty"`
}

// configKeys are the keys of bc config set, with their fields.
func (c *config) keys() map[string]*string {
	return map[string]*string{
		"url": &c.URL, "token": &c.Token, "tenant": &c.Tenant,
		"project": &c.Project, "pubsubEmulatorHost": &c.PubSubEmulatorHost,
	}
}

func configKeyNames() []string {
	var names []string
	for k := range (&config{}).keys() {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// configPath is the config file: BC_CONFIG, or bc/config.yaml in the
// user's config directory.
func configPath(lookup func(string) (string, bool)) (string, error) {
	if p, ok := lookup("BC_CONFIG"); ok && p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the config directory (set BC_CONFIG): %w", err)
	}
	return filepath.Join(dir, "bc", "config.yaml"), nil
}

// loadConfig reads the config file; a missing one is an empty config.
func loadConfig(path string) (config, error) {
	var c config
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

// saveConfig writes the config file, readable by its owner only (it
// holds a token).
func saveConfig(path string, c config) error {
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
