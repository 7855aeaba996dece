package firestore

import (
	"iter"
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

	// The same entries by scope, so that a query visits the documents it
	// can return rather than the whole database. An entry is indexed for
	// as long as it is in docs, deleted documents whose versions are still
	// retained included, since reads at an earlier time must find them:
	// add and drop are the only ways in and out.
	byCollection   map[string]map[string]*docEntry // by collection path (the document path without its ID), then document path
	byCollectionID map[string]map[string]*docEntry // by collection ID (for collection groups), then document path

	// deletions are the deletions recorded, in commit order. Once one is
	// older than the retention horizon and still the document's latest
	// version, the entry goes: no read can see the document then, and
	// otherwise the tombstones of every document ever deleted (outbox
	// events, say) would stay in the scope of queries.
	deletions []deletion
}

type deletion struct {
	path string
	at   time.Time
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
	return &database{
		name:           name,
		docs:           map[string]*docEntry{},
		byCollection:   map[string]map[string]*docEntry{},
		byCollectionID: map[string]map[string]*docEntry{},
	}
}

// collectionOf returns the path and the ID of the collection holding the
// document at path.
func collectionOf(path string) (coll, id string) {
	coll = path[:strings.LastIndexByte(path, '/')]
	return coll, coll[strings.LastIndexByte(coll, '/')+1:]
}

// add stores a new entry for the document at path, indexed.
func (d *database) add(path string, e *docEntry) {
	d.docs[path] = e
	coll, id := collectionOf(path)
	index(d.byCollection, coll, path, e)
	index(d.byCollectionID, id, path, e)
}

// drop forgets the document at path, all its versions, and its index
// entries.
func (d *database) drop(path string) {
	if d.docs[path] == nil {
		return
	}
	delete(d.docs, path)
	coll, id := collectionOf(path)
	unindex(d.byCollection, coll, path)
	unindex(d.byCollectionID, id, path)
}

func index(m map[string]map[string]*docEntry, key, path string, e *docEntry) {
	if m[key] == nil {
		m[key] = map[string]*docEntry{}
	}
	m[key][path] = e
}

// unindex removes path from the index, and the key once nothing is left
// under it, so that emptied collections do not accumulate.
func unindex(m map[string]map[string]*docEntry, key, path string) {
	delete(m[key], path)
	if len(m[key]) == 0 {
		delete(m, key)
	}
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
		d.add(path, e)
	}
	e.versions = append(e.versions, version{at: at, doc: doc})
	if doc == nil {
		d.deletions = append(d.deletions, deletion{path: path, at: at})
	}
	keep := 0
	for keep+1 < len(e.versions) && !e.versions[keep+1].at.After(horizon) {
		keep++
	}
	if keep > 0 {
		e.versions = append([]version(nil), e.versions[keep:]...)
	}
	if len(e.versions) == 1 && e.versions[0].doc == nil {
		d.drop(path)
	}
	d.expire(horizon)
}

// expire drops the entries of the documents deleted at or before horizon
// and not written since.
func (d *database) expire(horizon time.Time) {
	for len(d.deletions) > 0 && !d.deletions[0].at.After(horizon) {
		x := d.deletions[0]
		d.deletions = d.deletions[1:]
		if e := d.docs[x.path]; e != nil {
			if last := e.versions[len(e.versions)-1]; last.doc == nil && last.at.Equal(x.at) {
				d.drop(x.path)
			}
		}
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

// scope yields the entries (existing, deleted or not yet created at a given
// time) of the documents in the collection collID (any collection if empty)
// directly under parent, or at any depth below parent if allDescendants: it
// looks up the collection, or the collection group, in the indexes and
// visits every document only when collID is empty.
func (d *database) scope(parent, collID string, allDescendants bool) iter.Seq2[string, *docEntry] {
	entries := d.docs
	switch {
	case collID == "":
	case allDescendants:
		entries = d.byCollectionID[collID]
	case parent == "":
		entries = d.byCollection[collID]
	default:
		entries = d.byCollection[parent+"/"+collID]
	}
	return func(yield func(string, *docEntry) bool) {
		for path, e := range entries {
			if inScope(path, parent, collID, allDescendants) && !yield(path, e) {
				return
			}
		}
	}
}

// anyAt reports whether one of the entries is a document existing at time
// at (the latest state if zero).
func anyAt(entries map[string]*docEntry, at time.Time) bool {
	for _, e := range entries {
		if e.at(at) != nil {
			return true
		}
	}
	return false
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
