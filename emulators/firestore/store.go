package firestore

import (
	"sort"
	"strings"
	"time"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// database holds the documents of one database (projects/P/databases/D),
// each with the versions still inside the retention window.
type database struct {
	name string
	docs map[string]*docEntry // by document path (col/doc/...)
}

// docEntry is the version history of one document, oldest first. A version
// with a nil doc records a deletion.
type docEntry struct {
	versions []version
}

type version struct {
	at  time.Time
	doc *pb.Document
}

func newDatabase(name string) *database {
	return &database{name: name, docs: map[string]*docEntry{}}
}

// get returns the stored (not copied) document at path as of time at, or
// the latest version if at is zero; nil if it did not exist then.
func (d *database) get(path string, at time.Time) *pb.Document {
	e := d.docs[path]
	if e == nil {
		return nil
	}
	return e.at(at)
}

func (e *docEntry) at(t time.Time) *pb.Document {
	if t.IsZero() {
		return e.versions[len(e.versions)-1].doc
	}
	for i := len(e.versions) - 1; i >= 0; i-- {
		if !e.versions[i].at.After(t) {
			return e.versions[i].doc
		}
	}
	return nil
}

// put records a new version of the document at path. doc (nil for a
// deletion) must not be shared with callers. Versions older than the
// retention horizon are dropped, keeping the one in force at the horizon.
func (d *database) put(path string, at time.Time, doc *pb.Document, horizon time.Time) {
	e := d.docs[path]
	if e == nil {
		if doc == nil {
			return
		}
		e = &docEntry{}
		d.docs[path] = e
	}
	e.versions = append(e.versions, version{at: at, doc: doc})
	keep := 0
	for keep+1 < len(e.versions) && !e.versions[keep+1].at.After(horizon) {
		keep++
	}
	if keep > 0 {
		e.versions = append([]version(nil), e.versions[keep:]...)
	}
	if len(e.versions) == 1 && e.versions[0].doc == nil {
		delete(d.docs, path)
	}
}

// snapshot returns the documents existing at time at (latest if zero),
// sorted by name. The documents are the stored ones and must not be changed.
func (d *database) snapshot(at time.Time) []*pb.Document {
	docs := make([]*pb.Document, 0, len(d.docs))
	for _, e := range d.docs {
		if doc := e.at(at); doc != nil {
			docs = append(docs, doc)
		}
	}
	sort.Slice(docs, func(i, j int) bool { return compareNames(docs[i].Name, docs[j].Name) < 0 })
	return docs
}

// inScope reports whether the document at path belongs to the collection
// collID (any collection if empty) directly under parent, or at any depth
// below parent if allDescendants.
func inScope(path, parent, collID string, allDescendants bool) bool {
	rel := path
	if parent != "" {
		if len(path) <= len(parent) || path[len(parent)] != '/' || !strings.HasPrefix(path, parent) {
			return false
		}
		rel = path[len(parent)+1:]
	}
	// rel is col/doc[/col/doc...]: its collection is the segment before
	// the last one.
	slash := strings.LastIndexByte(rel, '/')
	if slash < 0 {
		return false
	}
	coll := rel[:slash]
	if i := strings.LastIndexByte(coll, '/'); i >= 0 {
		if !allDescendants {
			return false
		}
		coll = coll[i+1:]
	}
	return collID == "" || coll == collID
}

// cloneDoc copies a stored document for a caller.
func cloneDoc(d *pb.Document) *pb.Document {
	if d == nil {
		return nil
	}
	return proto.Clone(d).(*pb.Document)
}

// docPath strips the database prefix from a stored document's name.
func docPath(db, name string) string {
	return strings.TrimPrefix(name, db+"/documents/")
}

func timestampOf(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }
