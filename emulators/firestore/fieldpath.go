package firestore

import (
	"strings"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// fieldPath is a parsed field path: the segments of a.b.`c.d`.
type fieldPath []string

func (p fieldPath) String() string {
	out := make([]string, len(p))
	for i, s := range p {
		if isSimpleSegment(s) {
			out[i] = s
			continue
		}
		out[i] = "`" + strings.NewReplacer("\\", "\\\\", "`", "\\`").Replace(s) + "`"
	}
	return strings.Join(out, ".")
}

func isSimpleSegment(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}

// isPrefixOf reports whether p equals q or is an ancestor of q.
func (p fieldPath) isPrefixOf(q fieldPath) bool {
	if len(p) > len(q) {
		return false
	}
	for i := range p {
		if p[i] != q[i] {
			return false
		}
	}
	return true
}

// parseFieldPath parses Firestore's field path syntax: dot-separated
// segments, each either plain or backquoted with \` and \\ escapes.
func parseFieldPath(s string) (fieldPath, error) {
	if s == "" {
		return nil, status.Errorf(codes.InvalidArgument, "empty field path")
	}
	var (
		segs []string
		cur  strings.Builder
		i    int
	)
	for i < len(s) {
		if s[i] == '`' {
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				if c == '\\' && i+1 < len(s) {
					cur.WriteByte(s[i+1])
					i += 2
					continue
				}
				if c == '`' {
					closed = true
					i++
					break
				}
				cur.WriteByte(c)
				i++
			}
			if !closed {
				return nil, status.Errorf(codes.InvalidArgument, "invalid field path %q: unterminated backquote", s)
			}
			if i < len(s) && s[i] != '.' {
				return nil, status.Errorf(codes.InvalidArgument, "invalid field path %q", s)
			}
			if cur.Len() == 0 {
				return nil, status.Errorf(codes.InvalidArgument, "invalid field path %q: empty segment", s)
			}
		} else {
			for i < len(s) && s[i] != '.' {
				if s[i] == '`' {
					return nil, status.Errorf(codes.InvalidArgument, "invalid field path %q", s)
				}
				cur.WriteByte(s[i])
				i++
			}
			if cur.Len() == 0 {
				return nil, status.Errorf(codes.InvalidArgument, "invalid field path %q: empty segment", s)
			}
		}
		segs = append(segs, cur.String())
		cur.Reset()
		if i < len(s) { // at '.'
			i++
			if i == len(s) {
				return nil, status.Errorf(codes.InvalidArgument, "invalid field path %q: trailing dot", s)
			}
		}
	}
	return segs, nil
}

// getField returns the value at path p in fields, or nil if absent.
func getField(fields map[string]*pb.Value, p fieldPath) *pb.Value {
	for i, seg := range p {
		v, ok := fields[seg]
		if !ok {
			return nil
		}
		if i == len(p)-1 {
			return v
		}
		m, ok := v.GetValueType().(*pb.Value_MapValue)
		if !ok {
			return nil
		}
		fields = m.MapValue.GetFields()
	}
	return nil
}

// setField stores v at path p, creating or replacing intermediate maps.
// fields must be owned by the caller.
func setField(fields map[string]*pb.Value, p fieldPath, v *pb.Value) {
	for _, seg := range p[:len(p)-1] {
		next, ok := fields[seg]
		m, isMap := next.GetValueType().(*pb.Value_MapValue)
		if !ok || !isMap {
			m = &pb.Value_MapValue{MapValue: &pb.MapValue{}}
			fields[seg] = &pb.Value{ValueType: m}
		}
		if m.MapValue.Fields == nil {
			m.MapValue.Fields = map[string]*pb.Value{}
		}
		fields = m.MapValue.Fields
	}
	fields[p[len(p)-1]] = v
}

// deleteField removes the value at path p if present.
func deleteField(fields map[string]*pb.Value, p fieldPath) {
	for _, seg := range p[:len(p)-1] {
		m, ok := fields[seg].GetValueType().(*pb.Value_MapValue)
		if !ok {
			return
		}
		fields = m.MapValue.GetFields()
	}
	delete(fields, p[len(p)-1])
}

// project returns a copy of fields holding only the given paths.
func project(fields map[string]*pb.Value, paths []fieldPath) map[string]*pb.Value {
	out := map[string]*pb.Value{}
	for _, p := range paths {
		if v := getField(fields, p); v != nil {
			setField(out, p, proto.Clone(v).(*pb.Value))
		}
	}
	return out
}

// parseMask parses a document mask's paths.
func parseMask(m *pb.DocumentMask) ([]fieldPath, error) {
	paths := make([]fieldPath, 0, len(m.GetFieldPaths()))
	for _, s := range m.GetFieldPaths() {
		p, err := parseFieldPath(s)
		if err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// applyMask returns doc restricted to the mask, or doc itself if there is no
// mask. doc must already be a copy owned by the caller.
func applyMask(doc *pb.Document, mask []fieldPath, hasMask bool) *pb.Document {
	if !hasMask || doc == nil {
		return doc
	}
	doc.Fields = project(doc.Fields, mask)
	return doc
}
