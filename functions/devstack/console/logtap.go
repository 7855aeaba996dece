package console

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// LogTap keeps, of the records logged through its handler, the latest
// warning or error of each substrate and cluster, so that the console can
// show why a run failed as the log says it, where the resource's message
// says only that it is retried (a failure of Better Compute's own
// services keeps its cause out of the public message). It sees the
// records of the devstack's own process through Handler, and those of
// the instances (-instances above 1), which log JSON lines as
// shared/logging writes them, through NoteJSON. Each line it keeps is
// told to the functions of OnNote: the console's streams of that
// resource read it at once, rather than at the resource's next change.
type LogTap struct {
	mu     sync.Mutex
	last   map[string]LogLine
	order  []string // the keys, oldest first, to forget the oldest
	subs   map[int]func(kind, tenant, id string)
	nextID int
}

// LogLine is a warning or an error as the log has it.
type LogLine struct {
	At           time.Time
	Message, Err string
}

// maxLogKeys is how many resources the tap remembers a line of.
const maxLogKeys = 10000

// NewLogTap is a tap that remembers nothing yet.
func NewLogTap() *LogTap {
	return &LogTap{last: map[string]LogLine{}, subs: map[int]func(kind, tenant, id string){}}
}

// OnNote has f called with each warning or error the tap keeps: the
// resource's kind ("substrate" or "cluster"), its tenant ("" when the
// line names none) and ID. f is called on the logger's path, and must not
// log. stop ends the calls.
func (t *LogTap) OnNote(f func(kind, tenant, id string)) (stop func()) {
	if t == nil {
		return func() {}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	id := t.nextID
	t.nextID++
	t.subs[id] = f
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.subs, id)
	}
}

// Handler is next, which also tells the tap of each warning and error.
func (t *LogTap) Handler(next slog.Handler) slog.Handler { return &tapHandler{next: next, tap: t} }

// Last is the latest warning or error logged of a resource (kind
// "substrate" or "cluster"), and whether there is one.
func (t *LogTap) Last(kind, id string) (LogLine, bool) {
	if t == nil {
		return LogLine{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.last[kind+"/"+id]
	return l, ok
}

// record keeps l as the latest line of the resource a record's top-level
// attributes name (substrateId; or kind and id), if any.
func (t *LogTap) record(l LogLine, substrate, kind, tenant, id string) {
	switch {
	case substrate != "":
		t.note("substrate", tenant, substrate, l)
	case kind != "" && id != "":
		t.note(strings.TrimSuffix(kind, "s"), tenant, id, l)
	}
}

func (t *LogTap) note(kind, tenant, id string, l LogLine) {
	key := kind + "/" + id
	t.mu.Lock()
	if _, ok := t.last[key]; !ok {
		t.order = append(t.order, key)
		if len(t.order) > maxLogKeys {
			delete(t.last, t.order[0])
			t.order = t.order[1:]
		}
	}
	t.last[key] = l
	subs := make([]func(kind, tenant, id string), 0, len(t.subs))
	for _, f := range t.subs {
		subs = append(subs, f)
	}
	t.mu.Unlock()
	for _, f := range subs {
		f(kind, tenant, id)
	}
}

// NoteJSON reads a line of an instance's output: a warning or an error
// logged as shared/logging writes records (Cloud Logging's JSON:
// "severity", "message", "time", and the record's attributes, those of
// a group nested) is kept as Handler keeps the records of this process.
// Any other line is left alone.
func (t *LogTap) NoteJSON(line []byte) {
	if t == nil || !bytes.HasPrefix(line, []byte("{")) || !bytes.Contains(line, []byte(`"severity"`)) {
		return
	}
	var r struct {
		Severity    string    `json:"severity"`
		Message     string    `json:"message"`
		Time        time.Time `json:"time"`
		SubstrateID any       `json:"substrateId"`
		Kind        any       `json:"kind"`
		TenantID    any       `json:"tenantId"`
		ID          any       `json:"id"`
		Error       any       `json:"error"`
	}
	if json.Unmarshal(line, &r) != nil {
		return
	}
	switch r.Severity {
	case "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY":
	default:
		return
	}
	str := func(v any) string {
		switch v := v.(type) {
		case string:
			return v
		case nil:
			return ""
		default:
			b, _ := json.Marshal(v)
			return string(b)
		}
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	t.record(LogLine{At: r.Time, Message: r.Message, Err: str(r.Error)}, str(r.SubstrateID), str(r.Kind), str(r.TenantID), str(r.ID))
}

type tapHandler struct {
	next  slog.Handler
	tap   *LogTap
	attrs []slog.Attr // those of With, at the top level
	group bool        // attributes now go into a group
}

func (h *tapHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.next.Enabled(ctx, l)
}

func (h *tapHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var substrate, kind, tenant, id, err string
		see := func(a slog.Attr) bool {
			switch a.Key {
			case "substrateId":
				substrate = a.Value.String()
			case "tenantId":
				tenant = a.Value.String()
			case "kind":
				kind = a.Value.String()
			case "id":
				id = a.Value.String()
			case "error":
				err = a.Value.String()
			}
			return true
		}
		for _, a := range h.attrs {
			see(a)
		}
		if !h.group {
			r.Attrs(see)
		}
		h.tap.record(LogLine{At: r.Time, Message: r.Message, Err: err}, substrate, kind, tenant, id)
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *tapHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(as)
	if !h.group {
		c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	}
	return &c
}

func (h *tapHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	c.group = c.group || name != ""
	return &c
}
