package pubsub

import (
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// applyMask copies into dst the fields of src named by paths (field mask
// paths, snake_case, nested ones dotted), each of which must be in
// allowed or under one of them.
func applyMask(dst, src proto.Message, paths, allowed []string) error {
	for _, p := range paths {
		top, _, _ := strings.Cut(p, ".")
		if !slices.Contains(allowed, top) {
			return errorf(codes.InvalidArgument, "Invalid update_mask provided in the Update%sRequest: '%s' is not a known %s field. Note that field paths must be of the form 'push_config' rather than 'pushConfig'.",
				dst.ProtoReflect().Descriptor().Name(), p, dst.ProtoReflect().Descriptor().Name())
		}
		if err := copyPath(dst.ProtoReflect(), src.ProtoReflect(), strings.Split(p, ".")); err != nil {
			return err
		}
	}
	return nil
}

func copyPath(dst, src protoreflect.Message, path []string) error {
	fd := dst.Descriptor().Fields().ByName(protoreflect.Name(path[0]))
	if fd == nil {
		return errorf(codes.InvalidArgument, "Invalid update_mask: unknown field %q of %s.", path[0], dst.Descriptor().Name())
	}
	if len(path) == 1 {
		if src.Has(fd) {
			dst.Set(fd, src.Get(fd))
		} else {
			dst.Clear(fd)
		}
		return nil
	}
	if fd.Kind() != protoreflect.MessageKind || fd.IsList() || fd.IsMap() {
		return errorf(codes.InvalidArgument, "Invalid update_mask: %q is not a message field.", path[0])
	}
	if !src.Has(fd) {
		if dst.Has(fd) {
			return copyPath(dst.Mutable(fd).Message(), src.Get(fd).Message(), path[1:])
		}
		return nil
	}
	return copyPath(dst.Mutable(fd).Message(), src.Get(fd).Message(), path[1:])
}
