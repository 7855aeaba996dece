package main

import (
	"sort"

	"github.com/better-compute/kubernetes/shared/client"
)

// config is what bc keeps between runs, in the config file: the client's
// Config, which the OpenTofu provider reads too.
type config struct{ client.Config }

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
func configPath(lookup func(string) (string, bool)) (string, error) { return client.ConfigPath(lookup) }

// loadConfig reads the config file; a missing one is an empty config.
func loadConfig(path string) (config, error) {
	c, err := client.LoadConfig(path)
	return config{c}, err
}

// saveConfig writes the config file, readable by its owner only (it
// holds a token).
func saveConfig(path string, c config) error { return client.SaveConfig(path, c.Config) }
