package firestore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"sort"
	"strings"
	"sync"
	"time"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const (
	// versionRetention is how far back reads at a read time may look, as
	// Firestore allows without point-in-time recovery.
	versionRetention = time.Hour
	// txnIdleTimeout and txnMaxAge are when Firestore expires a transaction.
	txnIdleTimeout = 60 * time.Second
	txnMaxAge      = 270 * time.Second
	// lockWait bounds how long a transactional read waits for a document
	// locked by another transaction before it gives up with ABORTED.
	lockWait = 30 * time.Second
	// maxWrites is the number of writes Firestore accepts in one commit.
	maxWrites = 500
)

// GServer implements the google.firestore.v1.Firestore gRPC service on an
// in-memory store. Use it through Server unless you need to register it on a
// gRPC server of your own.
type GServer struct {
	pb.UnimplementedFirestoreServer

	mu         sync.Mutex
	now        func() time.Time
	dbs        map[string]*database
	txns       map[string]*txn
	locks      map[string]map[*txn]struct{} // document name → transactions holding a read lock on it
	released   chan struct{}                // closed and replaced whenever locks are released
	commits    chan struct{}                // closed and replaced whenever documents change
	lastCommit time.Time
	nextSeq    int64
	lastExpiry time.Time
	usage      Usage
}

var _ pb.FirestoreServer = (*GServer)(nil)

func newGServer(now func() time.Time) *GServer {
	return &GServer{
		now:      now,
		dbs:      map[string]*database{},
		txns:     map[string]*txn{},
		locks:    map[string]map[*txn]struct{}{},
		released: make(chan struct{}),
		commits:  make(chan struct{}),
	}
}

type txnState int

const (
	txnActive txnState = iota
	txnCommitted
	txnRolledBack
	txnAborted
)

// txn is a transaction. Read-write transactions take a shared lock on the
// documents they read: readers never wait for each other. A transaction that
// commits writes to documents others hold locks on waits for the older ones
// to end and aborts the younger ones (wound-wait on seq, so the older
// transaction wins and a retried one keeps its age). At commit, every
// document read and every query result must also be unchanged (a
// non-transactional write may have changed them), else the commit is
// ABORTED.
type txn struct {
	id       string
	db       string
	readOnly bool
	readTime time.Time // snapshot of a read-only transaction
	seq      int64     // priority: lower is older
	begun    time.Time
	lastUsed time.Time
	state    txnState
	reason   string
	reads    map[string]time.Time // document name → update time seen (zero: missing)
	queries  []recordedQuery
	locked   []string
}

// recordedQuery is a query run in a read-write transaction and the result it
// returned, checked again at commit to detect phantoms.
type recordedQuery struct {
	query  *query
	result []docVersion
}

type docVersion struct {
	name string
	at   time.Time
}

// database returns the named database, creating it on first use. Must be
// called with the lock held.
func (s *GServer) database(name string) *database {
	d := s.dbs[name]
	if d == nil {
		d = newDatabase(name)
		s.dbs[name] = d
	}
	return d
}

// readNow is the read time of a read at the latest state. Commit times may
// run ahead of the clock, so it is never before the last commit. Must be
// called with the lock held.
func (s *GServer) readNow() time.Time {
	t := s.now()
	if t.Before(s.lastCommit) {
		return s.lastCommit
	}
	return t
}

// commitTime returns a commit time strictly after every earlier one, at
// microsecond precision. Must be called with the lock held.
func (s *GServer) commitTime() time.Time {
	t := s.now().UTC().Truncate(time.Microsecond)
	if !t.After(s.lastCommit) {
		t = s.lastCommit.Add(time.Microsecond)
	}
	return t
}

// readCtx says what a read sees: the latest state (at zero) or a snapshot,
// and the transaction it belongs to, if any.
type readCtx struct {
	db       *database
	at       time.Time
	readTime time.Time
	tx       *txn   // read-write transaction recording reads; nil otherwise
	newTxID  []byte // set when the request began a transaction
}

// consistency resolves a request's consistency selector. Must be called with
// the lock held.
func (s *GServer) consistency(db string, txID []byte, newTx *pb.TransactionOptions, readTime *timestamppb.Timestamp) (readCtx, error) {
	rc := readCtx{db: s.database(db)}
	switch {
	case txID != nil:
		tx, err := s.activeTxn(db, txID)
		if err != nil {
			return rc, err
		}
		return s.txnReadCtx(rc, tx), nil
	case newTx != nil:
		tx, err := s.beginTxn(db, newTx)
		if err != nil {
			return rc, err
		}
		rc = s.txnReadCtx(rc, tx)
		rc.newTxID = []byte(tx.id)
		return rc, nil
	case readTime != nil:
		t, err := s.checkReadTime(readTime)
		if err != nil {
			return rc, err
		}
		rc.at, rc.readTime = t, t
		return rc, nil
	}
	rc.readTime = s.readNow()
	return rc, nil
}

func (s *GServer) txnReadCtx(rc readCtx, tx *txn) readCtx {
	if tx.readOnly {
		rc.at, rc.readTime = tx.readTime, tx.readTime
		return rc
	}
	rc.tx = tx
	rc.readTime = s.readNow()
	return rc
}

// checkReadTime validates a requested read time. Must be called with the
// lock held.
func (s *GServer) checkReadTime(ts *timestamppb.Timestamp) (time.Time, error) {
	if err := ts.CheckValid(); err != nil {
		return time.Time{}, status.Errorf(codes.InvalidArgument, "invalid read time: %v", err)
	}
	t := ts.AsTime()
	now := s.readNow()
	if t.After(now) {
		return time.Time{}, status.Errorf(codes.InvalidArgument, "read time %v is in the future", t)
	}
	if t.Before(now.Add(-versionRetention)) {
		return time.Time{}, status.Errorf(codes.FailedPrecondition, "read time %v is older than %v", t, versionRetention)
	}
	return t, nil
}

// beginTxn starts a transaction. Must be called with the lock held.
func (s *GServer) beginTxn(db string, opts *pb.TransactionOptions) (*txn, error) {
	s.expireTxns()
	now := s.now()
	s.nextSeq++
	tx := &txn{
		id:       newTxnID(),
		db:       db,
		seq:      s.nextSeq,
		begun:    now,
		lastUsed: now,
		reads:    map[string]time.Time{},
	}
	switch m := opts.GetMode().(type) {
	case *pb.TransactionOptions_ReadOnly_:
		tx.readOnly = true
		tx.readTime = s.readNow()
		if rt := m.ReadOnly.GetReadTime(); rt != nil {
			t, err := s.checkReadTime(rt)
			if err != nil {
				return nil, err
			}
			tx.readTime = t
		}
	case *pb.TransactionOptions_ReadWrite_:
		if retry := m.ReadWrite.GetRetryTransaction(); len(retry) > 0 {
			old := s.txns[string(retry)]
			if old == nil || old.db != db {
				return nil, status.Errorf(codes.InvalidArgument, "retry_transaction %s is not a transaction of %q", encodeTxnID(retry), db)
			}
			// A retry keeps its age, so wound-wait lets it win eventually.
			tx.seq = old.seq
		}
	}
	s.txns[tx.id] = tx
	return tx, nil
}

func newTxnID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return string(b)
}

func encodeTxnID(id []byte) string { return base64.StdEncoding.EncodeToString(id) }

// activeTxn returns the transaction with the given ID if it can still be
// used. Must be called with the lock held.
func (s *GServer) activeTxn(db string, id []byte) (*txn, error) {
	s.expireTxns()
	tx := s.txns[string(id)]
	if tx == nil || tx.db != db {
		return nil, status.Errorf(codes.InvalidArgument, "transaction %s has expired or is invalid", encodeTxnID(id))
	}
	switch tx.state {
	case txnAborted:
		return nil, status.Errorf(codes.Aborted, "transaction %s was aborted: %s", encodeTxnID(id), tx.reason)
	case txnCommitted, txnRolledBack:
		return nil, status.Errorf(codes.InvalidArgument, "transaction %s has already ended", encodeTxnID(id))
	}
	tx.lastUsed = s.now()
	return tx, nil
}

// expireTxns ends transactions that have been idle or open for too long and
// forgets ended ones that can no longer be retried. Must be called with the
// lock held.
func (s *GServer) expireTxns() {
	now := s.now()
	// Scanning every transaction on every call would make transactions
	// slow down as they accumulate; once a second is enough.
	if now.Sub(s.lastExpiry) < time.Second && now.After(s.lastExpiry) {
		return
	}
	s.lastExpiry = now
	for id, tx := range s.txns {
		switch {
		case tx.state == txnActive && (now.Sub(tx.lastUsed) > txnIdleTimeout || now.Sub(tx.begun) > txnMaxAge):
			s.endTxn(tx, txnRolledBack, "")
			delete(s.txns, id)
		case tx.state != txnActive && now.Sub(tx.lastUsed) > 2*txnMaxAge:
			delete(s.txns, id)
		}
	}
}

// notifyCommit wakes the listeners. Must be called with the lock held.
func (s *GServer) notifyCommit() {
	close(s.commits)
	s.commits = make(chan struct{})
}

// endTxn moves tx to a final state and releases its locks. Must be called
// with the lock held.
func (s *GServer) endTxn(tx *txn, st txnState, reason string) {
	if tx.state != txnActive {
		return
	}
	tx.state, tx.reason = st, reason
	tx.queries = nil
	if len(tx.locked) > 0 {
		for _, n := range tx.locked {
			delete(s.locks[n], tx)
			if len(s.locks[n]) == 0 {
				delete(s.locks, n)
			}
		}
		tx.locked = nil
		close(s.released)
		s.released = make(chan struct{})
	}
}

// lockDocs takes shared locks on the named documents for a read-write
// transaction: readers never wait for one another. Must be called with the
// lock held.
func (s *GServer) lockDocs(_ context.Context, tx *txn, names []string) error {
	if tx.state != txnActive {
		return status.Errorf(codes.Aborted, "transaction %s was aborted: %s", encodeTxnID([]byte(tx.id)), tx.reason)
	}
	for _, n := range names {
		holders := s.locks[n]
		if holders == nil {
			holders = map[*txn]struct{}{}
			s.locks[n] = holders
		}
		if _, ok := holders[tx]; !ok {
			holders[tx] = struct{}{}
			tx.locked = append(tx.locked, n)
		}
	}
	return nil
}

// lockForWrite readies the commit of tx's writes to the named documents:
// a younger transaction holding a lock on one of them is aborted (it read
// what is about to change), an older one is waited for, as Firestore's
// lock manager does. Must be called with the lock held; it is released
// while waiting.
func (s *GServer) lockForWrite(ctx context.Context, tx *txn, names []string) error {
	deadline := time.NewTimer(lockWait)
	defer deadline.Stop()
	for {
		if tx.state != txnActive {
			return status.Errorf(codes.Aborted, "transaction %s was aborted: %s", encodeTxnID([]byte(tx.id)), tx.reason)
		}
		var blocker *txn
		for _, n := range names {
			for h := range s.locks[n] {
				switch {
				case h == tx:
				case tx.seq < h.seq:
					s.endTxn(h, txnAborted, "an older transaction wrote a document it had read")
				default:
					blocker = h
				}
			}
		}
		if blocker == nil {
			return nil
		}
		ch := s.released
		s.mu.Unlock()
		var err error
		select {
		case <-ch:
		case <-ctx.Done():
			err = status.FromContextError(ctx.Err()).Err()
		case <-deadline.C:
			err = status.Errorf(codes.Aborted, "too much contention on documents written by transaction %s", encodeTxnID([]byte(tx.id)))
		case <-time.After(time.Second):
			// Wake up to expire an abandoned holder.
		}
		s.mu.Lock()
		if err != nil {
			return err
		}
		s.expireTxns()
	}
}

// recordRead notes what a read-write transaction saw of a document. Must be
// called with the lock held.
func (tx *txn) recordRead(name string, doc *pb.Document) {
	var at time.Time
	if doc != nil {
		at = doc.UpdateTime.AsTime()
	}
	if _, ok := tx.reads[name]; !ok {
		tx.reads[name] = at
	}
}

// BatchGetDocuments implements the Firestore BatchGetDocuments RPC. Results
// come in request order, one per distinct document, as Firestore answers a
// document requested twice once.
func (s *GServer) BatchGetDocuments(req *pb.BatchGetDocumentsRequest, stream pb.Firestore_BatchGetDocumentsServer) error {
	db, err := parseDatabase(req.GetDatabase())
	if err != nil {
		return err
	}
	var (
		names []docName
		full  []string
		seen  = map[string]bool{}
	)
	for _, name := range req.GetDocuments() {
		n, err := parseDocName(name)
		if err != nil {
			return err
		}
		if err := checkSameDB(db, n.db, name); err != nil {
			return err
		}
		if !seen[n.String()] {
			seen[n.String()] = true
			names, full = append(names, n), append(full, n.String())
		}
	}
	mask, err := parseMask(req.GetMask())
	if err != nil {
		return err
	}
	resps, err := s.batchGet(stream.Context(), req, db, names, full, mask)
	if err != nil {
		return err
	}
	for _, r := range resps {
		if err := stream.Send(r); err != nil {
			return err
		}
	}
	return nil
}

func (s *GServer) batchGet(ctx context.Context, req *pb.BatchGetDocumentsRequest, db string, names []docName, full []string, mask []fieldPath) ([]*pb.BatchGetDocumentsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rc, err := s.consistency(db, req.GetTransaction(), req.GetNewTransaction(), req.GetReadTime())
	if err != nil {
		return nil, err
	}
	if rc.tx != nil {
		if err := s.lockDocs(ctx, rc.tx, full); err != nil {
			return nil, err
		}
		rc.readTime = s.readNow()
	}
	rt := timestamppb.New(rc.readTime)
	var resps []*pb.BatchGetDocumentsResponse
	if rc.newTxID != nil && len(names) == 0 {
		resps = append(resps, &pb.BatchGetDocumentsResponse{Transaction: rc.newTxID, ReadTime: rt})
	}
	for i, n := range names {
		doc := rc.db.get(n.path, rc.at)
		if rc.tx != nil {
			rc.tx.recordRead(full[i], doc)
		}
		r := &pb.BatchGetDocumentsResponse{ReadTime: rt}
		if doc == nil {
			r.Result = &pb.BatchGetDocumentsResponse_Missing{Missing: full[i]}
		} else {
			r.Result = &pb.BatchGetDocumentsResponse_Found{Found: applyMask(cloneDoc(doc), mask, req.GetMask() != nil)}
		}
		if i == 0 && rc.newTxID != nil {
			r.Transaction = rc.newTxID
		}
		resps = append(resps, r)
	}
	if len(names) > 0 {
		s.countReads(len(names))
	}
	return resps, nil
}

// BeginTransaction implements the Firestore BeginTransaction RPC.
func (s *GServer) BeginTransaction(_ context.Context, req *pb.BeginTransactionRequest) (*pb.BeginTransactionResponse, error) {
	db, err := parseDatabase(req.GetDatabase())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.beginTxn(db, req.GetOptions())
	if err != nil {
		return nil, err
	}
	return &pb.BeginTransactionResponse{Transaction: []byte(tx.id)}, nil
}

// Rollback implements the Firestore Rollback RPC. Rolling back a transaction
// that was aborted is accepted; one that ended otherwise is not.
func (s *GServer) Rollback(_ context.Context, req *pb.RollbackRequest) (*emptypb.Empty, error) {
	db, err := parseDatabase(req.GetDatabase())
	if err != nil {
		return nil, err
	}
	if len(req.GetTransaction()) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "missing transaction")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.activeTxn(db, req.GetTransaction())
	if status.Code(err) == codes.Aborted {
		return &emptypb.Empty{}, nil
	}
	if err != nil {
		return nil, err
	}
	s.endTxn(tx, txnRolledBack, "rolled back")
	return &emptypb.Empty{}, nil
}

// ListCollectionIds implements the Firestore ListCollectionIds RPC: the IDs
// of the collections directly under the parent that hold documents at any
// depth, sorted.
func (s *GServer) ListCollectionIds(_ context.Context, req *pb.ListCollectionIdsRequest) (*pb.ListCollectionIdsResponse, error) {
	db, parent, err := parseParent(req.GetParent())
	if err != nil {
		return nil, err
	}
	if req.GetPageSize() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "negative page size %d", req.GetPageSize())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var at time.Time
	if rt := req.GetReadTime(); rt != nil {
		if at, err = s.checkReadTime(rt); err != nil {
			return nil, err
		}
	}
	prefix := ""
	if parent != "" {
		prefix = parent + "/"
	}
	// A collection holding documents (at any depth below parent) names the
	// collection directly under parent it is in. There are fewer
	// collections than documents.
	seen := map[string]bool{}
	for coll, entries := range s.database(db).byCollection {
		if !strings.HasPrefix(coll, prefix) {
			continue
		}
		id, _, _ := strings.Cut(coll[len(prefix):], "/")
		if !seen[id] && anyAt(entries, at) {
			seen[id] = true
		}
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		if tok := req.GetPageToken(); tok == "" || compareIDs(id, tok) > 0 {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return compareIDs(ids[i], ids[j]) < 0 })
	resp := &pb.ListCollectionIdsResponse{CollectionIds: ids}
	if ps := int(req.GetPageSize()); ps > 0 && len(ids) > ps {
		resp.CollectionIds = ids[:ps]
		resp.NextPageToken = ids[ps-1]
	}
	return resp, nil
}

// ListDocuments implements the Firestore ListDocuments RPC, ordered by name.
// With show_missing, documents that do not exist but have subcollections
// are listed with only their name.
func (s *GServer) ListDocuments(ctx context.Context, req *pb.ListDocumentsRequest) (*pb.ListDocumentsResponse, error) {
	db, parent, err := parseParent(req.GetParent())
	if err != nil {
		return nil, err
	}
	if id := req.GetCollectionId(); id != "" {
		if err := checkID(id, req.GetParent()+"/"+id); err != nil {
			return nil, err
		}
	}
	if ob := req.GetOrderBy(); ob != "" && ob != "__name__" && ob != "__name__ asc" {
		return nil, status.Errorf(codes.InvalidArgument, "unsupported order_by %q: only __name__ is supported", ob)
	}
	if req.GetPageSize() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "negative page size %d", req.GetPageSize())
	}
	var after string
	if tok := req.GetPageToken(); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "invalid page token %q", tok)
		}
		after = string(b)
	}
	mask, err := parseMask(req.GetMask())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rc, err := s.consistency(db, req.GetTransaction(), nil, req.GetReadTime())
	if err != nil {
		return nil, err
	}
	names := map[string]*pb.Document{}
	for _, e := range rc.db.scope(parent, req.GetCollectionId(), false) {
		if doc := e.at(rc.at); doc != nil {
			names[doc.Name] = doc
		}
	}
	if req.GetShowMissing() {
		// A document below a missing one makes the missing one listable:
		// the collections holding documents below the listed collection
		// name the documents they are under.
		under := ""
		if parent != "" {
			under = parent + "/"
		}
		if id := req.GetCollectionId(); id != "" {
			under += id + "/"
		}
		for coll, entries := range rc.db.byCollection {
			if !strings.HasPrefix(coll, under) {
				continue
			}
			segs := strings.Split(coll, "/")
			for i := 2; i < len(segs); i += 2 {
				anc := strings.Join(segs[:i], "/")
				if !inScope(anc, parent, req.GetCollectionId(), false) {
					continue
				}
				full := db + "/documents/" + anc
				if _, ok := names[full]; !ok && anyAt(entries, rc.at) {
					names[full] = nil
				}
				break
			}
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		if after == "" || compareNames(n, after) > 0 {
			sorted = append(sorted, n)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return compareNames(sorted[i], sorted[j]) < 0 })
	resp := &pb.ListDocumentsResponse{}
	ps := int(req.GetPageSize())
	for i, n := range sorted {
		if ps > 0 && i == ps {
			resp.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(sorted[i-1]))
			break
		}
		doc := names[n]
		if rc.tx != nil {
			rc.tx.recordRead(n, doc)
		}
		if doc == nil {
			resp.Documents = append(resp.Documents, &pb.Document{Name: n})
			continue
		}
		resp.Documents = append(resp.Documents, applyMask(cloneDoc(doc), mask, req.GetMask() != nil))
	}
	s.countReads(len(resp.Documents))
	return resp, nil
}

// equalDocVersions compares two recorded query results.
func equalDocVersions(a, b []docVersion) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || !a[i].at.Equal(b[i].at) {
			return false
		}
	}
	return true
}

func cloneQuery(q *pb.StructuredQuery) *pb.StructuredQuery {
	return proto.Clone(q).(*pb.StructuredQuery)
}
