package gke

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"cloud.google.com/go/container/apiv1/containerpb"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestGetJSONWebKeysVerifiesServiceAccountTokens: the key GetJSONWebKeys
// publishes, asked before the cluster's API server first runs, is the one
// the server then signs service account tokens with, under the same kid.
func TestGetJSONWebKeysVerifiesServiceAccountTokens(t *testing.T) {
	e := newK8sEnv(t, t.TempDir())
	e.createCluster(t)
	resp, err := e.client.GetJSONWebKeys(e.ctx, &containerpb.GetJSONWebKeysRequest{Parent: clusterN})
	if err != nil || len(resp.GetKeys()) != 1 {
		t.Fatalf("GetJSONWebKeys = %v, %v; want one key", resp, err)
	}
	jwk := resp.Keys[0]
	c, err := e.client.GetCluster(e.ctx, &containerpb.GetClusterRequest{Name: clusterN})
	if err != nil {
		t.Fatal(err)
	}
	cs := kubeClient(t, c, testToken)
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ServiceAccount: %v", err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(e.ctx, "sa", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	parts := strings.Split(tr.Status.Token, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts, want 3", len(parts))
	}
	var header struct{ Alg, Kid string }
	if b, err := base64.RawURLEncoding.DecodeString(parts[0]); err != nil || json.Unmarshal(b, &header) != nil {
		t.Fatalf("token header %q: %v", parts[0], err)
	}
	if header.Alg != "RS256" || header.Kid != jwk.Kid {
		t.Errorf("token header = %+v, want RS256 with kid %q", header, jwk.Kid)
	}
	n, err1 := base64.RawURLEncoding.DecodeString(jwk.N)
	ex, err2 := base64.RawURLEncoding.DecodeString(jwk.E)
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatalf("decode: %v %v %v", err1, err2, err3)
	}
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(ex).Int64())}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		t.Errorf("the token does not verify against the published key: %v", err)
	}
}
