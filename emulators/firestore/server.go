package firestore

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"k8s.io/utils/clock"

	"github.com/better-compute/kubernetes/emulators/faults"
)

// Server is an in-process Firestore emulator listening on a TCP address.
// Tests connect the official client to Addr; see the package comment.
type Server struct {
	// Addr is the address the server listens on, such as 127.0.0.1:54321.
	Addr string
	// GServer is the gRPC service implementation behind the server.
	GServer *GServer
	// Injector fails, delays and counts the calls of every RPC (package
	// faults): its FailNext, SetLatency, AddReactor and Calls are the
	// Server's.
	*faults.Injector

	srv       *grpc.Server
	lis       net.Listener
	closeOnce sync.Once
	served    chan struct{}
}

// Option configures a Server.
type Option func(*config)

type config struct {
	addr   string
	now    func() time.Time
	faults *faults.Injector
}

// WithAddr sets the listen address (default 127.0.0.1:0, a free port).
func WithAddr(addr string) Option { return func(c *config) { c.addr = addr } }

// WithClock sets the clock the server reads for commit, read and
// transaction times (nil, the default: the real one). Commit times stay
// strictly increasing whatever it returns.
func WithClock(c clock.PassiveClock) Option {
	return func(cfg *config) {
		if c != nil {
			cfg.now = c.Now
		}
	}
}

// WithReactor installs r for the RPC named funcName (the method name, such
// as "Commit" or "RunQuery"), as Server.AddReactor does once the server
// runs.
func WithReactor(funcName string, r faults.Reactor) Option {
	return func(c *config) { c.faults.AddReactor(funcName, r) }
}

// NewServer starts an emulator listening on the configured address. Close
// it when done.
func NewServer(opts ...Option) (*Server, error) {
	cfg := &config{addr: "127.0.0.1:0", now: time.Now, faults: &faults.Injector{}}
	for _, o := range opts {
		o(cfg)
	}
	lis, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.addr, err)
	}
	inj := cfg.faults
	gs := newGServer(cfg.now)
	s := &Server{Addr: lis.Addr().String(), GServer: gs, Injector: inj, lis: lis, served: make(chan struct{})}
	s.srv = grpc.NewServer(
		grpc.UnaryInterceptor(inj.UnaryInterceptor),
		grpc.StreamInterceptor(inj.StreamInterceptor),
		grpc.MaxRecvMsgSize(64<<20),
	)
	pb.RegisterFirestoreServer(s.srv, gs)
	inj.SetMethods(faults.MethodsOf(s.srv))
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(lis)
	}()
	return s, nil
}

// Close stops the server, ending open streams. It is safe to call twice.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.srv.Stop()
		<-s.served
	})
	return nil
}

// Reset deletes every document and transaction of every database and
// removes all reactors and latencies. Open transactions fail with
// INVALID_ARGUMENT.
func (s *Server) Reset() {
	s.RemoveFaults()
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, tx := range g.txns {
		g.endTxn(tx, txnRolledBack, "the emulator was reset")
	}
	g.dbs = map[string]*database{}
	g.txns = map[string]*txn{}
	g.notifyCommit()
}

// Document returns a copy of the latest version of the named document
// (projects/P/databases/D/documents/...), or nil if it does not exist.
func (s *Server) Document(name string) *pb.Document {
	n, err := parseDocName(name)
	if err != nil {
		return nil
	}
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.dbs[n.db]
	if d == nil {
		return nil
	}
	return cloneDoc(d.get(n.path, time.Time{}))
}

// Documents returns copies of the existing documents of the database
// (projects/P/databases/D), sorted by name.
func (s *Server) Documents(database string) []*pb.Document {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.dbs[database]
	if d == nil {
		return nil
	}
	snap := d.snapshot(time.Time{})
	out := make([]*pb.Document, len(snap))
	for i, doc := range snap {
		out[i] = cloneDoc(doc)
	}
	return out
}

// SetDocument stores a copy of doc as it is, with its create and update
// times (the current commit time if unset), bypassing validation of
// preconditions. It is meant for seeding tests.
func (s *Server) SetDocument(doc *pb.Document) error {
	n, err := parseDocName(doc.GetName())
	if err != nil {
		return fmt.Errorf("set document: %w", err)
	}
	if err := validateFields(doc.GetFields(), n.db, 1); err != nil {
		return fmt.Errorf("set document %q: %w", doc.GetName(), err)
	}
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seed(n, cloneDoc(doc))
	return nil
}

// seed stores doc as the latest version of its document. Must be called
// with the lock held.
func (g *GServer) seed(n docName, doc *pb.Document) {
	t := g.commitTime()
	if doc.UpdateTime == nil {
		doc.UpdateTime = timestampOf(t)
	}
	if doc.CreateTime == nil {
		doc.CreateTime = doc.UpdateTime
	}
	at := doc.UpdateTime.AsTime()
	if at.Before(g.lastCommit) {
		at = t // versions must stay in commit order
	}
	d := g.database(n.db)
	d.drop(n.path)
	d.put(n.path, at, doc, g.now().Add(-versionRetention))
	if at.After(g.lastCommit) {
		g.lastCommit = at
	}
	g.notifyCommit()
}

// exportFile is the format of Import; Export writes it with a Snapshot.
type exportFile struct {
	Documents []json.RawMessage `json:"documents"`
}

// Snapshot is the latest version of every document of every database at
// one instant, taken by Server.Snapshot.
type Snapshot struct {
	docs    []*pb.Document // stored versions, which never change
	changed chan struct{}
}

// Snapshot takes the latest version of every document of every database.
// It is the quick half of Export, holding the emulator's lock only to
// collect the stored versions, which never change, so a caller can take
// other state at the same instant; encoding them (MarshalJSON), the slow
// half, happens later without the lock.
func (s *Server) Snapshot() *Snapshot {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	sn := &Snapshot{changed: g.commits}
	for _, d := range g.dbs {
		sn.docs = append(sn.docs, d.snapshot(time.Time{})...)
	}
	return sn
}

// Changed is closed once any document changes after the snapshot.
func (sn *Snapshot) Changed() <-chan struct{} { return sn.changed }

// MarshalJSON encodes the documents as a JSON array of protojson
// Documents: what Export writes under "documents", and Import reads.
func (sn *Snapshot) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, doc := range sn.docs {
		if i > 0 {
			b.WriteByte(',')
		}
		j, err := protojson.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("export %q: %w", doc.Name, err)
		}
		b.Write(j)
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// Export writes the latest version of every document of every database as
// JSON: {"documents": [protojson Document, ...]}.
func (s *Server) Export(w io.Writer) error {
	out := struct {
		Documents *Snapshot `json:"documents"`
	}{s.Snapshot()}
	if err := json.NewEncoder(w).Encode(out); err != nil {
		return fmt.Errorf("export documents: %w", err)
	}
	return nil
}

// Import reads documents written by Export and stores them with their
// create and update times, replacing documents of the same name. Nothing is
// stored if any document is invalid.
func (s *Server) Import(r io.Reader) error {
	var in exportFile
	if err := json.NewDecoder(r).Decode(&in); err != nil {
		return fmt.Errorf("import documents: %w", err)
	}
	docs := make([]*pb.Document, 0, len(in.Documents))
	names := make([]docName, 0, len(in.Documents))
	for i, raw := range in.Documents {
		doc := &pb.Document{}
		if err := protojson.Unmarshal(raw, doc); err != nil {
			return fmt.Errorf("import document %d: %w", i, err)
		}
		n, err := parseDocName(doc.Name)
		if err != nil {
			return fmt.Errorf("import document %d: %w", i, err)
		}
		if err := validateFields(doc.Fields, n.db, 1); err != nil {
			return fmt.Errorf("import document %q: %w", doc.Name, err)
		}
		docs, names = append(docs, doc), append(names, n)
	}
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, doc := range docs {
		g.seed(names[i], doc)
	}
	return nil
}

func readRandom(b []byte) { _, _ = rand.Read(b) }
