package firestore

import pb "cloud.google.com/go/firestore/apiv1/firestorepb"

// Usage counts the operations Firestore bills, as its pricing page counts
// them (https://cloud.google.com/firestore/pricing): a read per document
// returned by a get, a query or a listener, per document asked for that
// does not exist, and per document a query's offset skipped; a query that
// returns nothing, or is explained without analyze, one read; an
// aggregation, one read per 1,000 documents it matched (a count with
// up_to, at most up_to), at least one; a write per document set, updated
// or transformed, a delete per document deleted, each in a write that
// succeeded. Reads of a transaction that aborts count, as they are billed.
type Usage struct {
	Reads, Writes, Deletes int64
}

// Usage returns the operations counted since the server started.
func (s *Server) Usage() Usage {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.usage
}

// countWrites counts the writes applied. Must be called with the lock
// held.
func (s *GServer) countWrites(pws []pendingWrite) {
	for _, pw := range pws {
		if _, del := pw.w.GetOperation().(*pb.Write_Delete); del {
			s.usage.Deletes++
		} else {
			s.usage.Writes++
		}
	}
}

// countReads counts n document reads, at least one (a lookup or a query
// that finds nothing is billed one). Must be called with the lock held.
func (s *GServer) countReads(n int) { s.usage.Reads += int64(max(n, 1)) }
