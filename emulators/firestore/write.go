package firestore

import (
	"context"
	"math"
	"time"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// pendingWrite is a write checked against the request, ready to be applied.
type pendingWrite struct {
	w    *pb.Write
	name docName
}

// checkWrite validates a write's form, independent of stored state.
func checkWrite(db string, w *pb.Write) (pendingWrite, error) {
	var name string
	switch op := w.GetOperation().(type) {
	case *pb.Write_Update:
		name = op.Update.GetName()
		if err := validateFields(op.Update.GetFields(), db, 1); err != nil {
			return pendingWrite{}, err
		}
	case *pb.Write_Delete:
		name = op.Delete
		if w.GetUpdateMask() != nil || len(w.GetUpdateTransforms()) > 0 {
			return pendingWrite{}, status.Errorf(codes.InvalidArgument, "a delete cannot have an update mask or transforms")
		}
	case *pb.Write_Transform:
		name = op.Transform.GetDocument()
		if w.GetUpdateMask() != nil || len(w.GetUpdateTransforms()) > 0 {
			return pendingWrite{}, status.Errorf(codes.InvalidArgument, "a transform write cannot have an update mask or update transforms")
		}
	default:
		return pendingWrite{}, status.Errorf(codes.InvalidArgument, "write has no operation")
	}
	n, err := parseDocName(name)
	if err != nil {
		return pendingWrite{}, err
	}
	if err := checkSameDB(db, n.db, name); err != nil {
		return pendingWrite{}, err
	}
	if pc := w.GetCurrentDocument(); pc != nil && pc.GetConditionType() == nil {
		return pendingWrite{}, status.Errorf(codes.InvalidArgument, "precondition of %q has no condition", name)
	}
	if ts := w.GetCurrentDocument().GetUpdateTime(); ts != nil && ts.CheckValid() != nil {
		return pendingWrite{}, status.Errorf(codes.InvalidArgument, "invalid update_time precondition for %q", name)
	}
	return pendingWrite{w: w, name: n}, nil
}

// applyWrite computes the effect of one write on the document cur (nil if
// missing) at commit time t. It returns the next document (nil if deleted),
// whether anything changed, and the write's result. cur is not modified.
func applyWrite(cur *pb.Document, pw pendingWrite, t time.Time) (*pb.Document, bool, *pb.WriteResult, error) {
	w, name := pw.w, pw.name.String()
	if pc := w.GetCurrentDocument(); pc != nil {
		switch c := pc.GetConditionType().(type) {
		case *pb.Precondition_Exists:
			if c.Exists && cur == nil {
				return nil, false, nil, status.Errorf(codes.NotFound, "No document to update: %s", name)
			}
			if !c.Exists && cur != nil {
				return nil, false, nil, status.Errorf(codes.AlreadyExists, "Document already exists: %s", name)
			}
		case *pb.Precondition_UpdateTime:
			want := c.UpdateTime.AsTime()
			if want.After(t) {
				// No version can have that time yet: Firestore rejects the
				// request rather than the document's state.
				return nil, false, nil, status.Errorf(codes.InvalidArgument, "update_time precondition %s of %s is in the future", want.Format(time.RFC3339Nano), name)
			}
			if cur == nil {
				return nil, false, nil, status.Errorf(codes.NotFound, "No document to update: %s", name)
			}
			if !cur.UpdateTime.AsTime().Equal(want) {
				// Firestore names versions by their time in microseconds.
				return nil, false, nil, status.Errorf(codes.FailedPrecondition, "the stored version (%d) does not match the required base version (%d)", cur.UpdateTime.AsTime().UnixMicro(), want.UnixMicro())
			}
		}
	}
	var (
		fields     map[string]*pb.Value
		transforms []*pb.DocumentTransform_FieldTransform
	)
	switch op := w.GetOperation().(type) {
	case *pb.Write_Delete:
		return nil, cur != nil, &pb.WriteResult{}, nil
	case *pb.Write_Transform:
		if cur == nil {
			fields = map[string]*pb.Value{}
		} else {
			fields = cloneFields(cur.Fields)
		}
		transforms = op.Transform.GetFieldTransforms()
	case *pb.Write_Update:
		transforms = w.GetUpdateTransforms()
		if w.GetUpdateMask() == nil {
			fields = cloneFields(op.Update.GetFields())
			break
		}
		paths, err := parseMask(w.GetUpdateMask())
		if err != nil {
			return nil, false, nil, err
		}
		if err := checkDisjoint(paths); err != nil {
			return nil, false, nil, err
		}
		if cur == nil {
			fields = map[string]*pb.Value{}
		} else {
			fields = cloneFields(cur.Fields)
		}
		for _, p := range paths {
			if v := getField(op.Update.GetFields(), p); v != nil {
				setField(fields, p, proto.Clone(v).(*pb.Value))
			} else {
				deleteField(fields, p)
			}
		}
	}
	results := make([]*pb.Value, 0, len(transforms))
	var tpaths []fieldPath
	for _, ft := range transforms {
		p, err := parseFieldPath(ft.GetFieldPath())
		if err != nil {
			return nil, false, nil, err
		}
		for _, q := range tpaths {
			if q.isPrefixOf(p) || p.isPrefixOf(q) {
				return nil, false, nil, status.Errorf(codes.InvalidArgument, "field %s is transformed more than once", p)
			}
		}
		tpaths = append(tpaths, p)
		v, err := transform(getField(fields, p), ft, t)
		if err != nil {
			return nil, false, nil, err
		}
		setField(fields, p, v)
		results = append(results, proto.Clone(v).(*pb.Value))
	}
	truncateTimes(fields)
	if size := docSize(pw.name.path, fields); size > maxDocSize {
		return nil, false, nil, status.Errorf(codes.InvalidArgument, "document %s cannot be written because its size (%d bytes) exceeds the maximum allowed size of %d bytes", name, size, maxDocSize)
	}
	if err := validateFields(fields, pw.name.db, 1); err != nil {
		return nil, false, nil, err
	}
	if cur != nil && fieldsEqual(cur.Fields, fields) {
		// Firestore leaves a document a write does not change untouched.
		return cur, false, &pb.WriteResult{UpdateTime: proto.Clone(cur.UpdateTime).(*timestamppb.Timestamp), TransformResults: results}, nil
	}
	ts := timestamppb.New(t)
	next := &pb.Document{Name: name, Fields: fields, CreateTime: ts, UpdateTime: ts}
	if cur != nil {
		next.CreateTime = proto.Clone(cur.CreateTime).(*timestamppb.Timestamp)
	}
	return next, true, &pb.WriteResult{UpdateTime: timestamppb.New(t), TransformResults: results}, nil
}

func checkDisjoint(paths []fieldPath) error {
	for i, p := range paths {
		for j, q := range paths {
			if i != j && p.isPrefixOf(q) {
				return status.Errorf(codes.InvalidArgument, "update mask has conflicting field paths %s and %s", p, q)
			}
		}
	}
	return nil
}

func cloneFields(f map[string]*pb.Value) map[string]*pb.Value {
	out := make(map[string]*pb.Value, len(f))
	for k, v := range f {
		out[k] = proto.Clone(v).(*pb.Value)
	}
	return out
}

func fieldsEqual(a, b map[string]*pb.Value) bool {
	return proto.Equal(&pb.MapValue{Fields: a}, &pb.MapValue{Fields: b})
}

// truncateTimes cuts timestamps to microseconds, the precision Firestore
// stores.
func truncateTimes(fields map[string]*pb.Value) {
	for _, v := range fields {
		truncateTime(v)
	}
}

func truncateTime(v *pb.Value) {
	switch x := v.GetValueType().(type) {
	case *pb.Value_TimestampValue:
		if x.TimestampValue != nil {
			x.TimestampValue.Nanos -= x.TimestampValue.Nanos % 1000
		}
	case *pb.Value_ArrayValue:
		for _, e := range x.ArrayValue.GetValues() {
			truncateTime(e)
		}
	case *pb.Value_MapValue:
		truncateTimes(x.MapValue.GetFields())
	}
}

// transform applies one field transform to the current value (nil if the
// field is absent).
func transform(cur *pb.Value, ft *pb.DocumentTransform_FieldTransform, t time.Time) (*pb.Value, error) {
	switch x := ft.GetTransformType().(type) {
	case *pb.DocumentTransform_FieldTransform_SetToServerValue:
		if x.SetToServerValue != pb.DocumentTransform_FieldTransform_REQUEST_TIME {
			return nil, status.Errorf(codes.InvalidArgument, "unsupported server value %v", x.SetToServerValue)
		}
		return &pb.Value{ValueType: &pb.Value_TimestampValue{TimestampValue: timestamppb.New(t)}}, nil
	case *pb.DocumentTransform_FieldTransform_Increment:
		if !isNumber(x.Increment) {
			return nil, status.Errorf(codes.InvalidArgument, "increment of %s must be a number", ft.GetFieldPath())
		}
		if !isNumber(cur) {
			return proto.Clone(x.Increment).(*pb.Value), nil
		}
		return addNumbers(cur, x.Increment), nil
	case *pb.DocumentTransform_FieldTransform_Maximum:
		if !isNumber(x.Maximum) {
			return nil, status.Errorf(codes.InvalidArgument, "maximum of %s must be a number", ft.GetFieldPath())
		}
		if !isNumber(cur) || compareNumbers(x.Maximum, cur) > 0 || (isNaN(x.Maximum) && !isNaN(cur)) {
			return proto.Clone(x.Maximum).(*pb.Value), nil
		}
		return proto.Clone(cur).(*pb.Value), nil
	case *pb.DocumentTransform_FieldTransform_Minimum:
		if !isNumber(x.Minimum) {
			return nil, status.Errorf(codes.InvalidArgument, "minimum of %s must be a number", ft.GetFieldPath())
		}
		if !isNumber(cur) || compareNumbers(x.Minimum, cur) < 0 {
			return proto.Clone(x.Minimum).(*pb.Value), nil
		}
		return proto.Clone(cur).(*pb.Value), nil
	case *pb.DocumentTransform_FieldTransform_AppendMissingElements:
		var elems []*pb.Value
		if a, ok := cur.GetValueType().(*pb.Value_ArrayValue); ok {
			elems = cloneValues(a.ArrayValue.GetValues())
		}
		for _, e := range x.AppendMissingElements.GetValues() {
			if !containsValue(elems, e) {
				elems = append(elems, proto.Clone(e).(*pb.Value))
			}
		}
		return &pb.Value{ValueType: &pb.Value_ArrayValue{ArrayValue: &pb.ArrayValue{Values: elems}}}, nil
	case *pb.DocumentTransform_FieldTransform_RemoveAllFromArray:
		elems := []*pb.Value{}
		if a, ok := cur.GetValueType().(*pb.Value_ArrayValue); ok {
			for _, e := range a.ArrayValue.GetValues() {
				if !containsValue(x.RemoveAllFromArray.GetValues(), e) {
					elems = append(elems, proto.Clone(e).(*pb.Value))
				}
			}
		}
		return &pb.Value{ValueType: &pb.Value_ArrayValue{ArrayValue: &pb.ArrayValue{Values: elems}}}, nil
	}
	return nil, status.Errorf(codes.InvalidArgument, "field transform of %s has no transform", ft.GetFieldPath())
}

func cloneValues(vs []*pb.Value) []*pb.Value {
	out := make([]*pb.Value, len(vs))
	for i, v := range vs {
		out[i] = proto.Clone(v).(*pb.Value)
	}
	return out
}

func containsValue(vs []*pb.Value, v *pb.Value) bool {
	for _, e := range vs {
		if valuesEqual(e, v) {
			return true
		}
	}
	return false
}

// addNumbers adds as Firestore's increment does: integers stay integers and
// saturate instead of overflowing; any double makes the sum a double.
func addNumbers(a, b *pb.Value) *pb.Value {
	ai, aok := a.GetValueType().(*pb.Value_IntegerValue)
	bi, bok := b.GetValueType().(*pb.Value_IntegerValue)
	if aok && bok {
		x, y := ai.IntegerValue, bi.IntegerValue
		s := x + y
		switch {
		case x > 0 && y > 0 && s < 0:
			s = math.MaxInt64
		case x < 0 && y < 0 && s >= 0:
			s = math.MinInt64
		}
		return &pb.Value{ValueType: &pb.Value_IntegerValue{IntegerValue: s}}
	}
	return &pb.Value{ValueType: &pb.Value_DoubleValue{DoubleValue: toFloat(a) + toFloat(b)}}
}

func toFloat(v *pb.Value) float64 {
	if i, ok := v.GetValueType().(*pb.Value_IntegerValue); ok {
		return float64(i.IntegerValue)
	}
	return v.GetDoubleValue()
}

// Commit implements the Firestore Commit RPC: all writes apply atomically at
// one commit time, or none do.
func (s *GServer) Commit(ctx context.Context, req *pb.CommitRequest) (*pb.CommitResponse, error) {
	db, err := parseDatabase(req.GetDatabase())
	if err != nil {
		return nil, err
	}
	if len(req.GetWrites()) > maxWrites {
		return nil, status.Errorf(codes.InvalidArgument, "a commit can contain at most %d writes, got %d", maxWrites, len(req.GetWrites()))
	}
	pws := make([]pendingWrite, len(req.GetWrites()))
	for i, w := range req.GetWrites() {
		if pws[i], err = checkWrite(db, w); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var tx *txn
	if id := req.GetTransaction(); len(id) > 0 {
		if tx, err = s.activeTxn(db, id); err != nil {
			return nil, err
		}
		if tx.readOnly && len(pws) > 0 {
			return nil, status.Errorf(codes.InvalidArgument, "cannot write in read-only transaction %s", encodeTxnID(id))
		}
		written := make([]string, len(pws))
		for i, pw := range pws {
			written[i] = pw.name.String()
		}
		if err := s.lockForWrite(ctx, tx, written); err != nil {
			return nil, err
		}
		if err := s.validateTxn(tx); err != nil {
			s.endTxn(tx, txnAborted, "its reads changed")
			return nil, err
		}
	}
	t := s.commitTime()
	results, err := s.applyWrites(s.database(db), pws, t)
	if err != nil {
		if tx != nil {
			s.endTxn(tx, txnRolledBack, "its commit failed")
		}
		return nil, err
	}
	if tx != nil {
		s.endTxn(tx, txnCommitted, "")
	}
	return &pb.CommitResponse{WriteResults: results, CommitTime: timestamppb.New(t)}, nil
}

// applyWrites applies the writes in order at commit time t, all or none.
// Must be called with the lock held.
func (s *GServer) applyWrites(d *database, pws []pendingWrite, t time.Time) ([]*pb.WriteResult, error) {
	next := map[string]*pb.Document{}
	changed := map[string]bool{}
	var order []string
	results := make([]*pb.WriteResult, len(pws))
	for i, pw := range pws {
		path := pw.name.path
		cur, seen := next[path]
		if !seen {
			cur = d.get(path, time.Time{})
			order = append(order, path)
		}
		doc, ch, res, err := applyWrite(cur, pw, t)
		if err != nil {
			return nil, err
		}
		next[path] = doc
		changed[path] = changed[path] || ch
		results[i] = res
	}
	s.store(d, order, next, changed, t)
	s.countWrites(pws)
	return results, nil
}

// store records the changed documents as new versions at time t. Must be
// called with the lock held.
func (s *GServer) store(d *database, order []string, next map[string]*pb.Document, changed map[string]bool, t time.Time) {
	horizon := s.now().Add(-versionRetention)
	n := 0
	for _, path := range order {
		if changed[path] {
			d.put(path, t, next[path], horizon)
			n++
		}
	}
	if t.After(s.lastCommit) {
		s.lastCommit = t
	}
	if n > 0 {
		s.notifyCommit()
	}
}

// validateTxn checks that nothing a read-write transaction read has changed
// since. Must be called with the lock held.
func (s *GServer) validateTxn(tx *txn) error {
	d := s.database(tx.db)
	for name, seen := range tx.reads {
		var now time.Time
		if doc := d.get(docPath(tx.db, name), time.Time{}); doc != nil {
			now = doc.UpdateTime.AsTime()
		}
		if !now.Equal(seen) {
			return status.Errorf(codes.Aborted, "transaction %s aborted: document %s changed after it was read", encodeTxnID([]byte(tx.id)), name)
		}
	}
	for _, q := range tx.queries {
		docs, _ := q.query.run(q.query.candidates(d, time.Time{}))
		if !equalDocVersions(versionsOf(docs), q.result) {
			return status.Errorf(codes.Aborted, "transaction %s aborted: the result of a query it ran changed", encodeTxnID([]byte(tx.id)))
		}
	}
	return nil
}

// BatchWrite implements the Firestore BatchWrite RPC: each write applies
// independently and gets its own status.
func (s *GServer) BatchWrite(_ context.Context, req *pb.BatchWriteRequest) (*pb.BatchWriteResponse, error) {
	db, err := parseDatabase(req.GetDatabase())
	if err != nil {
		return nil, err
	}
	if len(req.GetWrites()) > maxWrites {
		return nil, status.Errorf(codes.InvalidArgument, "a batch write can contain at most %d writes, got %d", maxWrites, len(req.GetWrites()))
	}
	pws := make([]pendingWrite, len(req.GetWrites()))
	seen := map[string]bool{}
	for i, w := range req.GetWrites() {
		if pws[i], err = checkWrite(db, w); err != nil {
			return nil, err
		}
		if seen[pws[i].name.path] {
			return nil, status.Errorf(codes.InvalidArgument, "batch write writes %s more than once", pws[i].name)
		}
		seen[pws[i].name.path] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.database(db)
	resp := &pb.BatchWriteResponse{}
	t := s.commitTime()
	for _, pw := range pws {
		res, err := s.applyWrites(d, []pendingWrite{pw}, t)
		if err != nil {
			st, _ := status.FromError(err)
			resp.WriteResults = append(resp.WriteResults, &pb.WriteResult{})
			resp.Status = append(resp.Status, &rpcstatus.Status{Code: int32(st.Code()), Message: st.Message()})
			continue
		}
		resp.WriteResults = append(resp.WriteResults, res[0])
		resp.Status = append(resp.Status, &rpcstatus.Status{Code: int32(code.Code_OK)})
	}
	if t.After(s.lastCommit) {
		s.lastCommit = t
	}
	return resp, nil
}

const idChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
