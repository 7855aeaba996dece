package telemetry

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
)

// A user's application default credentials name the project to charge
// (x-goog-user-project); a service account's are charged to its own.
func TestGoogleCredentialsQuotaProject(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	for _, c := range []struct {
		name   string
		file   map[string]string
		header string
	}{
		{"user", map[string]string{"type": "authorized_user", "client_id": "id", "client_secret": "secret", "refresh_token": "refresh"}, "bc-prod"},
		{"service account", map[string]string{"type": "service_account", "project_id": "bc-prod", "private_key_id": "k1", "private_key": string(keyPEM),
			"client_email": "fn@bc-prod.iam.gserviceaccount.com", "client_id": "1", "token_uri": "https://oauth2.googleapis.com/token"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.file)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "adc.json")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
			creds, headers, err := googleCredentials(context.Background(), "bc-prod")
			if err != nil {
				t.Fatalf("googleCredentials: %v", err)
			}
			if !creds.RequireTransportSecurity() {
				t.Error("OAuth tokens would go over a plain connection")
			}
			if got := headers["x-goog-user-project"]; got != c.header {
				t.Errorf("x-goog-user-project = %q, want %q (headers %v)", got, c.header, headers)
			}
		})
	}
}
