package firestore

import (
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"time"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// listenTarget is one target of a Listen stream and the documents the
// client was last told it holds.
type listenTarget struct {
	id      int32
	query   *query   // nil for a documents target
	names   []string // documents of a documents target
	sent    map[string]time.Time
	current bool
	reset   bool
}

// Listen implements the Firestore Listen RPC: for each target it sends the
// matching documents, marks the target current, and then sends the changes
// of every later commit, each batch closed by a global NO_CHANGE with its
// read time. Resuming from a token resets the target and sends it whole.
func (s *GServer) Listen(stream pb.Firestore_ListenServer) error {
	ctx := stream.Context()
	reqs := make(chan *pb.ListenRequest)
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done():
				return
			}
		}
	}()
	var (
		db      string
		targets = map[int32]*listenTarget{}
	)
	for {
		s.mu.Lock()
		changed := s.commits
		resps, err := s.listenSync(db, targets)
		s.mu.Unlock()
		if err != nil {
			return err
		}
		for _, r := range resps {
			if err := stream.Send(r); err != nil {
				return err
			}
		}
		select {
		case req := <-reqs:
			if db == "" {
				if db, err = parseDatabase(req.GetDatabase()); err != nil {
					return err
				}
			} else if req.GetDatabase() != db {
				return status.Errorf(codes.InvalidArgument, "a Listen stream serves one database, %q, not %q", db, req.GetDatabase())
			}
			switch x := req.GetTargetChange().(type) {
			case *pb.ListenRequest_AddTarget:
				t, err := newListenTarget(db, x.AddTarget)
				if err != nil {
					return err
				}
				if targets[t.id] != nil {
					return status.Errorf(codes.InvalidArgument, "target %d already exists", t.id)
				}
				targets[t.id] = t
				if err := stream.Send(&pb.ListenResponse{ResponseType: &pb.ListenResponse_TargetChange{TargetChange: &pb.TargetChange{
					TargetChangeType: pb.TargetChange_ADD, TargetIds: []int32{t.id},
				}}}); err != nil {
					return err
				}
			case *pb.ListenRequest_RemoveTarget:
				delete(targets, x.RemoveTarget)
				if err := stream.Send(&pb.ListenResponse{ResponseType: &pb.ListenResponse_TargetChange{TargetChange: &pb.TargetChange{
					TargetChangeType: pb.TargetChange_REMOVE, TargetIds: []int32{x.RemoveTarget},
				}}}); err != nil {
					return err
				}
			default:
				return status.Errorf(codes.InvalidArgument, "listen request has no target change")
			}
		case <-changed:
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

func newListenTarget(db string, t *pb.Target) (*listenTarget, error) {
	lt := &listenTarget{id: t.GetTargetId(), sent: map[string]time.Time{}}
	if t.GetResumeToken() != nil || t.GetReadTime() != nil {
		lt.reset = true
	}
	switch x := t.GetTargetType().(type) {
	case *pb.Target_Query:
		q, err := compileQuery(x.Query.GetParent(), x.Query.GetStructuredQuery())
		if err != nil {
			return nil, err
		}
		if q.db != db {
			return nil, status.Errorf(codes.InvalidArgument, "query parent %q is not in database %q", x.Query.GetParent(), db)
		}
		lt.query = q
	case *pb.Target_Documents:
		for _, name := range x.Documents.GetDocuments() {
			n, err := parseDocName(name)
			if err != nil {
				return nil, err
			}
			if err := checkSameDB(db, n.db, name); err != nil {
				return nil, err
			}
			if !slices.Contains(lt.names, n.String()) {
				lt.names = append(lt.names, n.String())
			}
		}
	default:
		return nil, status.Errorf(codes.InvalidArgument, "target has no query or documents")
	}
	return lt, nil
}

// listenSync computes what each target's client is missing and returns the
// responses that bring it up to date. Must be called with the lock held.
func (s *GServer) listenSync(db string, targets map[int32]*listenTarget) ([]*pb.ListenResponse, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	d := s.database(db)
	readTime := s.readNow()
	rt := timestamppb.New(readTime)
	var resps []*pb.ListenResponse
	for _, t := range targets {
		var docs []*pb.Document
		if t.query != nil {
			// The same scope and evaluation as RunQuery, so that a listener
			// sees exactly what the query returns.
			docs, _ = t.query.run(t.query.candidates(d, time.Time{}))
		} else {
			for _, name := range t.names {
				if doc := d.get(docPath(db, name), time.Time{}); doc != nil {
					docs = append(docs, doc)
				}
			}
		}
		if t.reset {
			t.reset = false
			resps = append(resps, targetChange(pb.TargetChange_RESET, t.id, nil))
		}
		now := map[string]time.Time{}
		for _, doc := range docs {
			at := doc.UpdateTime.AsTime()
			now[doc.Name] = at
			if prev, ok := t.sent[doc.Name]; ok && prev.Equal(at) {
				continue
			}
			shaped := cloneDoc(doc)
			if t.query != nil {
				shaped = t.query.shape(doc)
			}
			resps = append(resps, &pb.ListenResponse{ResponseType: &pb.ListenResponse_DocumentChange{DocumentChange: &pb.DocumentChange{
				Document: shaped, TargetIds: []int32{t.id},
			}}})
			s.usage.Reads++
		}
		for name := range t.sent {
			if _, ok := now[name]; ok {
				continue
			}
			if d.get(docPath(db, name), time.Time{}) == nil {
				resps = append(resps, &pb.ListenResponse{ResponseType: &pb.ListenResponse_DocumentDelete{DocumentDelete: &pb.DocumentDelete{
					Document: name, RemovedTargetIds: []int32{t.id}, ReadTime: rt,
				}}})
			} else {
				resps = append(resps, &pb.ListenResponse{ResponseType: &pb.ListenResponse_DocumentRemove{DocumentRemove: &pb.DocumentRemove{
					Document: name, RemovedTargetIds: []int32{t.id}, ReadTime: rt,
				}}})
			}
		}
		t.sent = now
		if !t.current {
			t.current = true
			resps = append(resps, targetChange(pb.TargetChange_CURRENT, t.id, resumeToken(readTime)))
		}
	}
	if len(resps) == 0 {
		return nil, nil
	}
	tc := targetChange(pb.TargetChange_NO_CHANGE, 0, resumeToken(readTime))
	tc.GetTargetChange().ReadTime = rt
	return append(resps, tc), nil
}

func targetChange(typ pb.TargetChange_TargetChangeType, id int32, token []byte) *pb.ListenResponse {
	tc := &pb.TargetChange{TargetChangeType: typ, ResumeToken: token}
	if id != 0 {
		tc.TargetIds = []int32{id}
	}
	return &pb.ListenResponse{ResponseType: &pb.ListenResponse_TargetChange{TargetChange: tc}}
}

// resumeToken encodes a read time; the emulator only uses it to notice that a
// target is being resumed.
func resumeToken(t time.Time) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(t.UnixNano()))
	return b
}
