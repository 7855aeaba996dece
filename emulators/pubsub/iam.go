package pubsub

import (
	"bytes"
	"context"
	"strconv"
	"strings"

	iampb "cloud.google.com/go/iam/apiv1/iampb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// The IAM policy methods of topics, subscriptions, snapshots and schemas
// keep a policy per resource, with an etag that changes with each
// SetIamPolicy, and enforce nothing: whoever the emulator serves may do
// everything, so TestIamPermissions grants every permission asked for.

// emptyEtag is the etag of a resource that never had a policy set, as
// Pub/Sub answers it.
var emptyEtag = []byte("ACAB")

// resourceExists says whether the resource of a policy exists. Must be
// called with the lock held.
func (s *Server) resourceExists(name string) error {
	parts := strings.Split(name, "/")
	if len(parts) != 4 {
		return invalidName(name)
	}
	if _, err := parseName(name, parts[2]); err != nil {
		return err
	}
	var ok bool
	switch parts[2] {
	case "topics":
		_, ok = s.topics[name]
	case "subscriptions":
		_, ok = s.subs[name]
	case "snapshots":
		s.expireSnapshots()
		_, ok = s.snapshots[name]
	case "schemas":
		_, ok = s.schemas[name]
	default:
		return invalidName(name)
	}
	if !ok {
		return notFound(name)
	}
	return nil
}

func (s *Server) GetIamPolicy(_ context.Context, req *iampb.GetIamPolicyRequest) (*iampb.Policy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.resourceExists(req.GetResource()); err != nil {
		return nil, err
	}
	if p, ok := s.policies[req.Resource]; ok {
		return proto.Clone(p).(*iampb.Policy), nil
	}
	return &iampb.Policy{Etag: emptyEtag}, nil
}

func (s *Server) SetIamPolicy(_ context.Context, req *iampb.SetIamPolicyRequest) (*iampb.Policy, error) {
	if req.GetPolicy() == nil {
		return nil, errorf(codes.InvalidArgument, "A policy must be given.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.resourceExists(req.GetResource()); err != nil {
		return nil, err
	}
	current := emptyEtag
	if p, ok := s.policies[req.Resource]; ok {
		current = p.Etag
	}
	if len(req.Policy.Etag) > 0 && !bytes.Equal(req.Policy.Etag, current) {
		return nil, errorf(codes.Aborted, "There were concurrent policy changes. Please retry the whole read-modify-write with exponential backoff.")
	}
	p := proto.Clone(req.Policy).(*iampb.Policy)
	s.etags++
	p.Etag = []byte("BwX" + strconv.FormatInt(s.etags, 36))
	s.policies[req.Resource] = p
	return proto.Clone(p).(*iampb.Policy), nil
}

func (s *Server) TestIamPermissions(_ context.Context, req *iampb.TestIamPermissionsRequest) (*iampb.TestIamPermissionsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.resourceExists(req.GetResource()); err != nil {
		return nil, err
	}
	return &iampb.TestIamPermissionsResponse{Permissions: append([]string(nil), req.Permissions...)}, nil
}
