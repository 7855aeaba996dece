package kubesim

import (
	"fmt"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// Kubeconfig returns a kubeconfig (YAML) with one context, named name, for
// the API server at endpoint (host:port) that trusts caPEM and presents
// token: what kubectl and clientcmd read.
func Kubeconfig(name, endpoint string, caPEM []byte, token string) ([]byte, error) {
	cfg := clientcmdv1.Config{
		Kind:           "Config",
		APIVersion:     "v1",
		CurrentContext: name,
		Clusters: []clientcmdv1.NamedCluster{{Name: name, Cluster: clientcmdv1.Cluster{
			Server:                   "https://" + endpoint,
			CertificateAuthorityData: caPEM,
		}}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: name, AuthInfo: clientcmdv1.AuthInfo{Token: token}}},
		Contexts:  []clientcmdv1.NamedContext{{Name: name, Context: clientcmdv1.Context{Cluster: name, AuthInfo: name}}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubesim: kubeconfig: %w", err)
	}
	return b, nil
}
