package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/better-compute/kubernetes/shared/client"
)

// Devstack defaults (API.md §8).
const (
	devURL          = "http://127.0.0.1:8080"
	devPubSub       = "127.0.0.1:8085"
	devProject      = "bc-dev"
	devDefaultUser  = "alice"
	devTokenComment = "a development token, valid one hour"
)

func (a *app) loginCommand() *cobra.Command {
	var (
		dev            bool
		user, pubsub   string
		project, token string
	)
	cmd := &cobra.Command{
		Use:   "login (--dev [--user alice] | --token TOKEN) [--url URL] [--tenant TENANT]",
		Short: "Keep the API's URL, a token and a tenant in the config file",
		Example: "  bc login --dev --tenant acme                  # the devstack on " + devURL + ", as alice\n" +
			"  bc login --url https://api.example.com --token \"$TOKEN\" --tenant acme",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dev == (token != "") {
				return &usageError{errors.New("give --dev (a token from the devstack) or --token TOKEN")}
			}
			cfg := a.cfg
			url := a.url
			if cmd.Flags().Changed("url") || url == "" {
				url = strings.TrimRight(a.flagOr(cmd, "url", devURL), "/")
			}
			cfg.URL = url
			if dev {
				tok, err := client.DevToken(a.ctx, url, user)
				if err != nil {
					return fmt.Errorf("get a token from the devstack at %s (is it running? go run ./functions/cmd/devstack): %w", url, err)
				}
				cfg.Token = tok
				cfg.PubSubEmulatorHost = pubsub
				cfg.Project = devProject
			} else {
				cfg.Token = token
			}
			if project != "" {
				cfg.Project = project
			}
			if cmd.Flags().Changed("tenant") {
				cfg.Tenant = a.tenant
			}
			if err := saveConfig(a.cfgPath, cfg); err != nil {
				return err
			}
			who := "with the given token"
			if dev {
				who = "as " + user + " (" + devTokenComment + ")"
			}
			fmt.Fprintf(a.stderr, "Logged in to %s %s; tenant %q. Config: %s\n", url, who, cfg.Tenant, a.cfgPath)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&dev, "dev", false, "take a development token from the devstack (POST /dev/token)")
	f.StringVar(&user, "user", devDefaultUser, "with --dev: the principal of the token (the default seed: alice is admin, bob viewer of acme)")
	f.StringVar(&pubsub, "pubsub-emulator", devPubSub, "with --dev: the devstack's Pub/Sub emulator, for bc events tail")
	f.StringVar(&project, "project", "", "the Google Cloud project of the event topics (--dev: "+devProject+")")
	f.StringVar(&token, "token", "", "a bearer token of the API's issuer")
	return cmd
}

// flagOr is the value of the persistent flag name when given, else def.
func (a *app) flagOr(cmd *cobra.Command, name, def string) string {
	if cmd.Flags().Changed(name) {
		v, _ := cmd.Flags().GetString(name)
		return v
	}
	return def
}

func (a *app) configCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Show or change the config file"}
	cmd.AddCommand(&cobra.Command{
		Use:   "view",
		Short: "Print the config file (the token shortened)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := a.cfg
			if len(c.Token) > 16 {
				c.Token = c.Token[:8] + "..." + c.Token[len(c.Token)-4:]
			}
			b, err := yaml.Marshal(c)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "# %s\n%s", a.cfgPath, b)
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "set KEY VALUE",
		Short: "Set a key of the config file: " + strings.Join(configKeyNames(), ", "),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return &usageError{fmt.Errorf("want KEY VALUE; keys: %s", strings.Join(configKeyNames(), ", "))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.cfg
			field, ok := c.keys()[args[0]]
			if !ok {
				return &usageError{fmt.Errorf("no key %q; keys: %s", args[0], strings.Join(configKeyNames(), ", "))}
			}
			*field = args[1]
			return saveConfig(a.cfgPath, c)
		},
	})
	return cmd
}
