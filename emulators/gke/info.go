package gke

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// GetJSONWebKeys publishes the public half of the key the cluster signs
// its service account tokens with, as a JWKS of one RS256 key whose kid is
// the one the Kubernetes API server puts in the tokens it signs (the
// key's SHA-256, base64url), so that a token verifies against it. With
// WithKubernetes it is the cluster's API server's own key (sa.key in the
// cluster's directory, made here first if the server has not run yet);
// without, a key made for the cluster on the first call, kept for the
// life of the server (Snapshot does not save it).
func (s *GServer) GetJSONWebKeys(_ context.Context, req *containerpb.GetJSONWebKeysRequest) (*containerpb.GetJSONWebKeysResponse, error) {
	k, err := parseCluster(zonesAsLocations(req.Parent), "", "", "")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.settle()
	c, err := s.cluster(k)
	var keyFile string
	var pub *rsa.PublicKey
	if err == nil {
		if c.kube != nil {
			keyFile = filepath.Join(c.kube.dir(), "sa.key")
		}
		pub = c.signingKey
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	// Making an RSA key takes long enough that it is done without the lock.
	switch {
	case keyFile != "":
		if pub, err = fileSigningKey(keyFile); err != nil {
			return nil, status.Errorf(codes.Internal, "signing key of %s: %v", k, err)
		}
	case pub == nil:
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "signing key of %s: %v", k, err)
		}
		s.mu.Lock()
		if c.signingKey == nil {
			c.signingKey = &key.PublicKey
		}
		pub = c.signingKey
		s.mu.Unlock()
	}
	jwk, err := rsaJWK(pub)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "signing key of %s: %v", k, err)
	}
	return &containerpb.GetJSONWebKeysResponse{Keys: []*containerpb.Jwk{jwk}}, nil
}

// fileSigningKey reads the public half of the PKCS #8 RSA key in path,
// as the Kubernetes API server's --service-account-key-file takes it,
// making the key first if there is none.
func fileSigningKey(path string) (*rsa.PublicKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if b, err = newKeyFile(path); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	key, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	rk, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an RSA key", path)
	}
	return &rk.PublicKey, nil
}

// newKeyFile writes a new RSA key to path unless one is there by then
// (the API server makes its own when it starts without one), and returns
// the file's contents.
func newKeyFile(path string) ([]byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return nil, err
	}
	return b, f.Close()
}

// rsaJWK is pub as a JSON Web Key, with the kid the Kubernetes API server
// gives tokens signed by its private half.
func rsaJWK(pub *rsa.PublicKey) (*containerpb.Jwk, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return &containerpb.Jwk{
		Kty: "RSA",
		Alg: "RS256",
		Use: "sig",
		Kid: base64.RawURLEncoding.EncodeToString(sum[:]),
		N:   base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
		E:   base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
	}, nil
}

// autoSubnets are the IPv4 ranges of an auto mode VPC network's subnets,
// as Compute Engine documents them, for the regions of the catalog.
var autoSubnets = map[string]string{
	"asia-southeast1":         "10.148.0.0/20",
	"europe-west1":            "10.132.0.0/20",
	"europe-west4":            "10.164.0.0/20",
	"northamerica-northeast1": "10.162.0.0/20",
	"northamerica-northeast2": "10.188.0.0/20",
	"northamerica-south1":     "10.224.0.0/20",
	"us-central1":             "10.128.0.0/20",
	"us-east1":                "10.142.0.0/20",
	"us-west1":                "10.138.0.0/20",
	"us-west2":                "10.168.0.0/20",
	"us-west4":                "10.182.0.0/20",
}

// maxUsableSubnetworksPage is the API's largest (and default) page size.
const maxUsableSubnetworksPage = 500

// ListUsableSubnetworks lists the subnetworks of the project's default
// network, an auto mode one with a subnet named default in each region of
// the catalog, as GKE lists a project's usable subnetworks: the
// subnetwork and network by path, the subnet's range, no secondary
// ranges. The filter is read only for networkProjectId=P: another
// project's networks (Shared VPC) are not modelled, so that lists
// nothing; any other filter is ignored. Pages are page_size long (500
// when 0), and the page token is the simulator's own.
func (s *GServer) ListUsableSubnetworks(_ context.Context, req *containerpb.ListUsableSubnetworksRequest) (*containerpb.ListUsableSubnetworksResponse, error) {
	v, ok := splitName(req.Parent, "projects", "*")
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "Invalid parent %q: want projects/{project}.", req.Parent)
	}
	project := v[0]
	size := int(req.PageSize)
	switch {
	case size < 0 || size > maxUsableSubnetworksPage:
		return nil, status.Errorf(codes.InvalidArgument, "page_size %d is out of range [0, %d].", size, maxUsableSubnetworksPage)
	case size == 0:
		size = maxUsableSubnetworksPage
	}
	start := 0
	if req.PageToken != "" {
		n, err := strconv.Atoi(req.PageToken)
		if err != nil || n < 0 {
			return nil, status.Errorf(codes.InvalidArgument, "Invalid page_token %q.", req.PageToken)
		}
		start = n
	}
	if p, ok := strings.CutPrefix(strings.ReplaceAll(req.Filter, " ", ""), "networkProjectId="); ok && p != project {
		return &containerpb.ListUsableSubnetworksResponse{}, nil
	}
	var all []*containerpb.UsableSubnetwork
	for _, r := range slices.Sorted(maps.Keys(autoSubnets)) {
		all = append(all, &containerpb.UsableSubnetwork{
			Subnetwork:  fmt.Sprintf("projects/%s/regions/%s/subnetworks/default", project, r),
			Network:     fmt.Sprintf("projects/%s/global/networks/default", project),
			IpCidrRange: autoSubnets[r],
		})
	}
	resp := &containerpb.ListUsableSubnetworksResponse{}
	if start >= len(all) {
		return resp, nil
	}
	end := min(start+size, len(all))
	resp.Subnetworks = all[start:end]
	if end < len(all) {
		resp.NextPageToken = strconv.Itoa(end)
	}
	return resp, nil
}

// CheckAutopilotCompatibility answers for any cluster that nothing keeps
// it from Autopilot: an empty list of issues, with a summary in the
// simulator's words. The simulator does not look at the cluster's
// workloads, which is what GKE checks.
func (s *GServer) CheckAutopilotCompatibility(_ context.Context, req *containerpb.CheckAutopilotCompatibilityRequest) (*containerpb.CheckAutopilotCompatibilityResponse, error) {
	k, err := parseCluster(zonesAsLocations(req.Name), "", "", "")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	if _, err := s.cluster(k); err != nil {
		return nil, err
	}
	return &containerpb.CheckAutopilotCompatibilityResponse{Summary: "No compatibility issues found."}, nil
}
