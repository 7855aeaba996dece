package firestore

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestSnapshot takes a snapshot, changes a document after it, and checks
// that the snapshot keeps what it took, says that something changed, and
// encodes what Import reads.
func TestSnapshot(t *testing.T) {
	srv, c := newTestServer(t)
	ctx := testCtx(t)
	if _, err := c.Doc("s/a").Set(ctx, map[string]any{"v": 1}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	sn := srv.Snapshot()
	changed := func() bool {
		select {
		case <-sn.Changed():
			return true
		default:
			return false
		}
	}
	if _, err := c.Doc("s/a").Get(ctx); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if changed() {
		t.Errorf("Changed() is closed after a read, want open")
	}
	if _, err := c.Doc("s/a").Set(ctx, map[string]any{"v": 2}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if _, err := c.Doc("s/b").Set(ctx, map[string]any{"v": 3}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if !changed() {
		t.Errorf("Changed() is open after a write, want closed")
	}

	b, err := json.Marshal(map[string]any{"documents": sn, "other": "ignored by Import"})
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	srv.Reset()
	if err := srv.Import(bytes.NewReader(b)); err != nil {
		t.Fatalf("Import(%s): %v", b, err)
	}
	a := srv.Document(testDB + "/documents/s/a")
	if a == nil || a.Fields["v"].GetIntegerValue() != 1 {
		t.Errorf("s/a after Import = %v, want v 1 as in the snapshot", a)
	}
	if d := srv.Document(testDB + "/documents/s/b"); d != nil {
		t.Errorf("s/b after Import = %v, want none: it came after the snapshot", d)
	}
}
