package pubsub

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// view returns the revision as the view shows it: BASIC without its
// definition.
func view(sc *pb.Schema, v pb.SchemaView) *pb.Schema {
	c := proto.Clone(sc).(*pb.Schema)
	if v != pb.SchemaView_FULL {
		c.Definition = ""
	}
	return c
}

// schemaName splits projects/p/schemas/id@revision.
func schemaName(name string) (base, revision string, err error) {
	base, revision, _ = strings.Cut(name, "@")
	if _, err := parseName(base, "schemas"); err != nil {
		return "", "", err
	}
	return base, revision, nil
}

// checkSchema checks a schema's definition as Pub/Sub does when it is
// created or validated.
func checkSchema(sc *pb.Schema) error {
	var err error
	switch sc.GetType() {
	case pb.Schema_AVRO:
		_, err = parseAvro(sc.Definition)
	case pb.Schema_PROTOCOL_BUFFER:
		err = checkProto(sc.Definition)
	default:
		return errorf(codes.InvalidArgument, "Invalid schema type: %v.", sc.GetType())
	}
	if err != nil {
		return errorf(codes.InvalidArgument, "Invalid schema definition: %v.", err)
	}
	return nil
}

var protoMessage = regexp.MustCompile(`(?m)^\s*message\s+[A-Za-z_][A-Za-z0-9_]*\s*\{`)

// checkProto checks what it can of a .proto definition without a
// compiler: one top-level message, and braces that balance.
func checkProto(def string) error {
	depth, top := 0, 0
	for i, c := range def {
		switch c {
		case '{':
			if depth == 0 && protoMessage.MatchString(def[:i+1][strings.LastIndex(def[:i+1], "\n")+1:]) {
				top++
			}
			depth++
		case '}':
			depth--
			if depth < 0 {
				return fmt.Errorf("unbalanced braces")
			}
		}
	}
	if depth != 0 {
		return fmt.Errorf("unbalanced braces")
	}
	if top != 1 {
		return fmt.Errorf("the definition must contain exactly one top-level message type, it has %d", top)
	}
	return nil
}

// checkSchemaSettings refuses a topic bound to a schema: no caller of the
// emulator binds one (emulators/README.md), so it does not check what is
// published against a schema, and it says so rather than take settings
// it would not enforce.
func checkSchemaSettings(set *pb.SchemaSettings) error {
	if set.GetSchema() == "" {
		return nil
	}
	return errorf(codes.Unimplemented, "Topics bound to a schema are not served by this emulator.")
}

// newRevision stores sc as the newest revision of its schema. Must be
// called with the lock held.
func (s *Server) newRevision(sc *pb.Schema) *pb.Schema {
	s.revisions++
	sc.RevisionId = fmt.Sprintf("%08x", s.revisions)
	sc.RevisionCreateTime = ts(s.now())
	s.schemas[sc.Name] = append([]*pb.Schema{sc}, s.schemas[sc.Name]...)
	return sc
}

func (s *Server) CreateSchema(_ context.Context, req *pb.CreateSchemaRequest) (*pb.Schema, error) {
	if _, err := parseProject(req.GetParent()); err != nil {
		return nil, err
	}
	name := req.Parent + "/schemas/" + req.SchemaId
	if _, err := parseName(name, "schemas"); err != nil {
		return nil, err
	}
	sc := proto.Clone(req.GetSchema()).(*pb.Schema)
	sc.Name = name
	if err := checkSchema(sc); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.schemas[name]; ok {
		return nil, exists(name)
	}
	return proto.Clone(s.newRevision(sc)).(*pb.Schema), nil
}

// revision returns the revision of name (id@revision, or the newest).
// Must be called with the lock held.
func (s *Server) revision(name string) (*pb.Schema, error) {
	base, rev, err := schemaName(name)
	if err != nil {
		return nil, err
	}
	revs := s.schemas[base]
	if len(revs) == 0 {
		return nil, notFound(base)
	}
	if rev == "" {
		return revs[0], nil
	}
	for _, r := range revs {
		if r.RevisionId == rev {
			return r, nil
		}
	}
	return nil, notFound(name)
}

func (s *Server) GetSchema(_ context.Context, req *pb.GetSchemaRequest) (*pb.Schema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.revision(req.GetName())
	if err != nil {
		return nil, err
	}
	v := req.View
	if v == pb.SchemaView_SCHEMA_VIEW_UNSPECIFIED {
		v = pb.SchemaView_FULL
	}
	return view(r, v), nil
}

func (s *Server) ListSchemas(_ context.Context, req *pb.ListSchemasRequest) (*pb.ListSchemasResponse, error) {
	project, err := parseProject(req.GetParent())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	names, next := page(namesIn(s.schemas, project), req.PageSize, req.PageToken)
	resp := &pb.ListSchemasResponse{NextPageToken: next}
	for _, n := range names {
		resp.Schemas = append(resp.Schemas, view(s.schemas[n][0], req.View))
	}
	return resp, nil
}

// DeleteSchema deletes a schema.
func (s *Server) DeleteSchema(_ context.Context, req *pb.DeleteSchemaRequest) (*emptypb.Empty, error) {
	base, _, err := schemaName(req.GetName())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.schemas[base]; !ok {
		return nil, notFound(base)
	}
	delete(s.schemas, base)
	delete(s.policies, base)
	return &emptypb.Empty{}, nil
}

func (s *Server) ValidateSchema(_ context.Context, req *pb.ValidateSchemaRequest) (*pb.ValidateSchemaResponse, error) {
	if _, err := parseProject(req.GetParent()); err != nil {
		return nil, err
	}
	if err := checkSchema(req.GetSchema()); err != nil {
		return nil, err
	}
	return &pb.ValidateSchemaResponse{}, nil
}
