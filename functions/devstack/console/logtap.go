package console

import (
	"context"
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
// records of the devstack's own process only: with -instances above 1,
// the functions log in theirs.
type LogTap struct {
	mu    sync.Mutex
	last  map[string]LogLine
	order []string // the keys, oldest first, to forget the oldest
}

// LogLine is a warning or an error as the log has it.
type LogLine struct {
	At           time.Time
	Message, Err string
}

// maxLogKeys is how many resources the tap remembers a line of.
const maxLogKeys = 10000

// NewLogTap is a tap that remembers nothing yet.
func NewLogTap() *LogTap { return &LogTap{last: map[string]LogLine{}} }

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

func (t *LogTap) note(key string, l LogLine) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.last[key]; !ok {
		t.order = append(t.order, key)
		if len(t.order) > maxLogKeys {
			delete(t.last, t.order[0])
			t.order = t.order[1:]
		}
	}
	t.last[key] = l
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
		var substrate, kind, id, err string
		see := func(a slog.Attr) bool {
			switch a.Key {
			case "substrateId":
				substrate = a.Value.String()
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
		l := LogLine{At: r.Time, Message: r.Message, Err: err}
		switch {
		case substrate != "":
			h.tap.note("substrate/"+substrate, l)
		case kind != "" && id != "":
			h.tap.note(strings.TrimSuffix(kind, "s")+"/"+id, l)
		}
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
