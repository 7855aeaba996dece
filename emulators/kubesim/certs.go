package kubesim

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// CA is a certificate authority: a self-signed certificate and its key,
// PEM-encoded. The API server's serving certificate is signed by it, so
// that clients trust the server through CertPEM alone (a kubeconfig's
// certificate-authority-data, GKE's clusterCaCertificate).
type CA struct {
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA returns a new CA named name, valid for ten years. Its key is
// ECDSA P-256, which takes a millisecond to make (an RSA key takes a
// hundred).
func NewCA(name string) (CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return CA{}, fmt.Errorf("kubesim: CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return CA{}, fmt.Errorf("kubesim: CA certificate: %w", err)
	}
	keyPEM, err := marshalKey(key)
	if err != nil {
		return CA{}, err
	}
	return CA{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

// parse returns the CA's certificate and signer.
func (ca CA) parse() (*x509.Certificate, crypto.Signer, error) {
	pair, err := tls.X509KeyPair(ca.CertPEM, ca.KeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("kubesim: CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("kubesim: CA: %w", err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok || !cert.IsCA {
		return nil, nil, errors.New("kubesim: CA: not a CA certificate with a signing key")
	}
	return cert, signer, nil
}

// ServingCert returns a new certificate and key for the names the API
// server answers to (servingCert's), signed by ca, in PEM: what a proxy in
// front of the server presents in its stead.
func (ca CA) ServingCert() (certPEM, keyPEM []byte, err error) { return servingCert(ca) }

// servingCert returns a certificate for 127.0.0.1 and localhost (and the
// in-cluster names a client may use), signed by ca, and its key, in PEM.
func servingCert(ca CA) (certPEM, keyPEM []byte, err error) {
	caCert, caKey, err := ca.parse()
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("kubesim: serving key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("kubesim: serving certificate: %w", err)
	}
	keyPEM, err = marshalKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// serviceAccountKey returns the RSA key in path, making it first if
// there is none: the API server signs service account tokens with it, and
// those it signed before a restart stay valid after.
func serviceAccountKey(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("kubesim: service account key: %w", err)
	}
	b, err := marshalKey(key)
	if err != nil {
		return err
	}
	return writeFile(path, b)
}

func marshalKey(key crypto.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("kubesim: marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}

// writeFile writes b to path, readable by its owner only (keys, tokens).
func writeFile(path string, b []byte) error {
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("kubesim: %w", err)
	}
	return nil
}
