package kubesim

import (
	"crypto/tls"
	"fmt"
	"path/filepath"
	"time"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// DefaultWebhookCacheTTL is how long the server keeps a webhook's answer
// unless Webhook.CacheTTL says otherwise.
const DefaultWebhookCacheTTL = 5 * time.Second

// Webhook is a service outside the server that says who a bearer token
// stands for (TokenReview, authentication.k8s.io/v1) and what they may do
// (SubjectAccessReview, authorization.k8s.io/v1), as a cloud provider's
// identity service does for its managed clusters. The server's own tokens
// (the admin token, Options.Tokens) are checked first and never sent.
type Webhook struct {
	// AuthenticateURL receives the TokenReviews: https, trusted through
	// CAPEM. Required.
	AuthenticateURL string
	// AuthorizeURL, when set, receives SubjectAccessReviews of the
	// requests RBAC does not allow; a review that does not allow them
	// refuses them (403).
	AuthorizeURL string
	// CAPEM is the CA that signed the webhook's serving certificate
	// (CA.ServingCertificate makes one).
	CAPEM []byte
	// CacheTTL is how long the server keeps an answer, allowed or not,
	// before it asks again: how long a change of who may do what takes
	// to be felt. DefaultWebhookCacheTTL when zero.
	CacheTTL time.Duration
}

// webhookArgs writes w's kubeconfigs in dir and returns the flags that
// name them, and RBAC's place among the authorizers.
func webhookArgs(w *Webhook, dir string) ([]string, error) {
	if w.AuthenticateURL == "" || len(w.CAPEM) == 0 {
		return nil, fmt.Errorf("kubesim: a webhook needs an AuthenticateURL and its CA")
	}
	ttl := w.CacheTTL
	if ttl <= 0 {
		ttl = DefaultWebhookCacheTTL
	}
	authn := filepath.Join(dir, "authn-webhook.yaml")
	if err := writeWebhookConfig(authn, w.AuthenticateURL, w.CAPEM); err != nil {
		return nil, err
	}
	args := []string{
		"--authentication-token-webhook-config-file=" + authn,
		"--authentication-token-webhook-version=v1",
		"--authentication-token-webhook-cache-ttl=" + ttl.String(),
		"--authorization-mode=RBAC",
	}
	if w.AuthorizeURL != "" {
		authz := filepath.Join(dir, "authz-webhook.yaml")
		if err := writeWebhookConfig(authz, w.AuthorizeURL, w.CAPEM); err != nil {
			return nil, err
		}
		args[len(args)-1] = "--authorization-mode=RBAC,Webhook"
		args = append(args,
			"--authorization-webhook-config-file="+authz,
			"--authorization-webhook-version=v1",
			"--authorization-webhook-cache-authorized-ttl="+ttl.String(),
			"--authorization-webhook-cache-unauthorized-ttl="+ttl.String(),
		)
	}
	return args, nil
}

// writeWebhookConfig writes the kubeconfig kube-apiserver reads for a
// webhook: the service's URL and the CA to trust, no credentials.
func writeWebhookConfig(path, url string, caPEM []byte) error {
	cfg := clientcmdv1.Config{
		Kind:           "Config",
		APIVersion:     "v1",
		CurrentContext: "webhook",
		Clusters:       []clientcmdv1.NamedCluster{{Name: "webhook", Cluster: clientcmdv1.Cluster{Server: url, CertificateAuthorityData: caPEM}}},
		AuthInfos:      []clientcmdv1.NamedAuthInfo{{Name: "webhook"}},
		Contexts:       []clientcmdv1.NamedContext{{Name: "webhook", Context: clientcmdv1.Context{Cluster: "webhook", AuthInfo: "webhook"}}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("kubesim: webhook kubeconfig: %w", err)
	}
	return writeFile(path, b)
}

// ServingCertificate returns a certificate for 127.0.0.1 and localhost
// signed by ca, for a service the API server calls (a Webhook) to serve
// TLS with.
func (ca CA) ServingCertificate() (tls.Certificate, error) {
	certPEM, keyPEM, err := servingCert(ca)
	if err != nil {
		return tls.Certificate{}, err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("kubesim: serving certificate: %w", err)
	}
	return c, nil
}
