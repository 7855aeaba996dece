package pubsub

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// deletedSchema is the schema a topic names once its schema is deleted.
const deletedSchema = "_deleted-schema_"

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
// created, committed or validated.
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

// checkMessage checks a message's data against one revision of a schema
// in an encoding. What it does not check is listed in the package comment.
func checkMessage(sc *pb.Schema, enc pb.Encoding, data []byte) error {
	if enc == pb.Encoding_BINARY {
		return nil
	}
	switch sc.Type {
	case pb.Schema_AVRO:
		t, err := parseAvro(sc.Definition)
		if err != nil {
			return err
		}
		return checkAvroJSON(t, data)
	case pb.Schema_PROTOCOL_BUFFER:
		var v map[string]any
		if err := json.Unmarshal(data, &v); err != nil {
			return fmt.Errorf("the message is not a JSON object: %v", err)
		}
	}
	return nil
}

// checkSchemaSettings checks that a topic's schema exists. Must be called
// with the lock held.
func (s *Server) checkSchemaSettings(set *pb.SchemaSettings) error {
	if set == nil {
		return nil
	}
	base, _, err := schemaName(set.Schema)
	if err != nil {
		return err
	}
	if _, ok := s.schemas[base]; !ok {
		return notFound(base)
	}
	return nil
}

// validateAgainstTopic checks a message against the topic's schema, any
// revision between the settings' first and last. Must be called with the
// lock held.
func (s *Server) validateAgainstTopic(t *pb.Topic, m *pb.PubsubMessage) error {
	set := t.GetSchemaSettings()
	if set == nil || set.Schema == "" {
		return nil
	}
	revs := s.schemas[set.Schema]
	if len(revs) == 0 {
		return errorf(codes.FailedPrecondition, "The topic's schema %s was deleted.", set.Schema)
	}
	// revs is newest first: from last_revision_id down to first_revision_id.
	in := set.LastRevisionId == ""
	var last error
	for _, r := range revs {
		in = in || r.RevisionId == set.LastRevisionId
		if !in {
			continue
		}
		if last = checkMessage(r, set.Encoding, m.Data); last == nil {
			return nil
		}
		if r.RevisionId == set.FirstRevisionId {
			break
		}
	}
	if last == nil {
		last = fmt.Errorf("no revision of the schema is in the topic's range")
	}
	return errorf(codes.InvalidArgument, "Invalid data in message: Message failed schema validation: %v.", last)
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

func (s *Server) ListSchemaRevisions(_ context.Context, req *pb.ListSchemaRevisionsRequest) (*pb.ListSchemaRevisionsResponse, error) {
	base, _, err := schemaName(req.GetName())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	revs := s.schemas[base]
	if len(revs) == 0 {
		return nil, notFound(base)
	}
	// Newest first; the page token is the revision ID of the last one
	// sent.
	start := 0
	if req.PageToken != "" {
		for i, r := range revs {
			if r.RevisionId == req.PageToken {
				start = i + 1
			}
		}
	}
	size := int(req.PageSize)
	if size <= 0 || size > 1000 {
		size = 1000
	}
	resp := &pb.ListSchemaRevisionsResponse{}
	for _, r := range revs[start:min(start+size, len(revs))] {
		resp.Schemas = append(resp.Schemas, view(r, req.View))
	}
	if start+size < len(revs) {
		resp.NextPageToken = revs[start+size-1].RevisionId
	}
	return resp, nil
}

func (s *Server) CommitSchema(_ context.Context, req *pb.CommitSchemaRequest) (*pb.Schema, error) {
	base, _, err := schemaName(req.GetName())
	if err != nil {
		return nil, err
	}
	sc := proto.Clone(req.GetSchema()).(*pb.Schema)
	sc.Name = base
	if err := checkSchema(sc); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	revs := s.schemas[base]
	if len(revs) == 0 {
		return nil, notFound(base)
	}
	if revs[0].Type != sc.Type {
		return nil, errorf(codes.InvalidArgument, "A schema revision must keep the schema's type, %v.", revs[0].Type)
	}
	return proto.Clone(s.newRevision(sc)).(*pb.Schema), nil
}

func (s *Server) RollbackSchema(_ context.Context, req *pb.RollbackSchemaRequest) (*pb.Schema, error) {
	base, _, err := schemaName(req.GetName())
	if err != nil {
		return nil, err
	}
	if req.RevisionId == "" {
		return nil, errorf(codes.InvalidArgument, "The revision_id must be set.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.revision(base + "@" + req.RevisionId)
	if err != nil {
		return nil, err
	}
	c := proto.Clone(r).(*pb.Schema)
	return proto.Clone(s.newRevision(c)).(*pb.Schema), nil
}

func (s *Server) DeleteSchemaRevision(_ context.Context, req *pb.DeleteSchemaRevisionRequest) (*pb.Schema, error) {
	base, rev, err := schemaName(req.GetName())
	if err != nil {
		return nil, err
	}
	if rev == "" {
		rev = req.RevisionId //nolint:staticcheck // the deprecated field, still sent by older clients
	}
	if rev == "" {
		return nil, errorf(codes.InvalidArgument, "The schema revision to delete must be named as schema@revision.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	revs := s.schemas[base]
	if len(revs) == 0 {
		return nil, notFound(base)
	}
	for i, r := range revs {
		if r.RevisionId != rev {
			continue
		}
		if len(revs) == 1 {
			return nil, errorf(codes.FailedPrecondition, "The only revision of a schema cannot be deleted; delete the schema.")
		}
		s.schemas[base] = append(revs[:i:i], revs[i+1:]...)
		return proto.Clone(r).(*pb.Schema), nil
	}
	return nil, notFound(req.Name)
}

// DeleteSchema deletes a schema and its revisions; topics that use it name
// _deleted-schema_ and refuse publications.
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
	for _, t := range s.topics {
		if set := t.pb.SchemaSettings; set != nil && set.Schema == base {
			set.Schema = deletedSchema
		}
	}
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

func (s *Server) ValidateMessage(_ context.Context, req *pb.ValidateMessageRequest) (*pb.ValidateMessageResponse, error) {
	if _, err := parseProject(req.GetParent()); err != nil {
		return nil, err
	}
	sc := req.GetSchema()
	if name := req.GetName(); name != "" {
		s.mu.Lock()
		r, err := s.revision(name)
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		sc = r
	} else if err := checkSchema(sc); err != nil {
		return nil, err
	}
	if err := checkMessage(sc, req.Encoding, req.Message); err != nil {
		return nil, errorf(codes.InvalidArgument, "Invalid data in message: Message failed schema validation: %v.", err)
	}
	return &pb.ValidateMessageResponse{}, nil
}
