package kubesim

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// TestWebhookArgs checks the flags a webhook adds: authorization mode
// named once (kube-apiserver refuses a mode given twice), each webhook's
// kubeconfig pointing at its URL and trusting its CA.
func TestWebhookArgs(t *testing.T) {
	ca, err := NewCA("webhook")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		w        Webhook
		wantMode string
		files    map[string]string // kubeconfig → URL
	}{
		{"authentication only", Webhook{AuthenticateURL: "https://127.0.0.1:1/authn", CAPEM: ca.CertPEM}, "RBAC",
			map[string]string{"authn-webhook.yaml": "https://127.0.0.1:1/authn"}},
		{"and authorization", Webhook{AuthenticateURL: "https://127.0.0.1:1/authn", AuthorizeURL: "https://127.0.0.1:1/authz", CAPEM: ca.CertPEM}, "RBAC,Webhook",
			map[string]string{"authn-webhook.yaml": "https://127.0.0.1:1/authn", "authz-webhook.yaml": "https://127.0.0.1:1/authz"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			args, err := webhookArgs(&c.w, dir)
			if err != nil {
				t.Fatal(err)
			}
			var modes []string
			for _, a := range args {
				if m, ok := strings.CutPrefix(a, "--authorization-mode="); ok {
					modes = append(modes, m)
				}
			}
			if !slices.Equal(modes, []string{c.wantMode}) {
				t.Errorf("authorization modes %v, want once %q", modes, c.wantMode)
			}
			if !slices.Contains(args, "--authentication-token-webhook-cache-ttl="+DefaultWebhookCacheTTL.String()) {
				t.Errorf("args %v do not bound the cache to %v", args, DefaultWebhookCacheTTL)
			}
			for file, url := range c.files {
				b, err := os.ReadFile(filepath.Join(dir, file))
				if err != nil {
					t.Fatal(err)
				}
				cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
				if err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				if cfg.Host != url || string(cfg.CAData) != string(ca.CertPEM) || cfg.BearerToken != "" {
					t.Errorf("%s: host %q, CA %d bytes, token %q; want %q with the webhook's CA and no credential", file, cfg.Host, len(cfg.CAData), cfg.BearerToken, url)
				}
			}
		})
	}
	if _, err := webhookArgs(&Webhook{CAPEM: ca.CertPEM}, t.TempDir()); err == nil {
		t.Error("a webhook without its URL was accepted")
	}
}
