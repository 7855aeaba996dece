// Package logging writes slog records as the structured JSON that Cloud
// Logging reads from a Cloud Run container's stdout: "severity" instead of
// "level", "message" instead of "msg", the trace and span of the request,
// and the source location, each under the key Cloud Logging expects.
//
// A request's logger travels in its context: the function layer stores one
// with NewContext (or With, to attach resource keys such as "tenantId" once),
// and deeper code gets it with FromContext. The request's trace is stored
// with WithTrace and added to every record logged under that context.
package logging

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
)

// Keys of the Cloud Logging structured-logging format.
const (
	KeySeverity       = "severity"
	KeyMessage        = "message"
	KeyTime           = "time"
	KeyTrace          = "logging.googleapis.com/trace"
	KeySpanID         = "logging.googleapis.com/spanId"
	KeyTraceSampled   = "logging.googleapis.com/trace_sampled"
	KeySourceLocation = "logging.googleapis.com/sourceLocation"
)

// Options configures NewHandler. The zero value logs at Info and above
// without source locations.
type Options struct {
	// Level is the minimum level logged; nil means slog.LevelInfo. A
	// *slog.LevelVar changes it at run time.
	Level slog.Leveler
	// AddSource adds logging.googleapis.com/sourceLocation (file, line,
	// function) to every record.
	AddSource bool
}

// New returns a logger writing Cloud Logging JSON lines to w at level and
// above, with source locations. Writes to w are serialized by the handler.
func New(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(NewHandler(w, &Options{Level: level, AddSource: true}))
}

// NewHandler returns a handler writing one Cloud Logging JSON object per
// record to w. It adds the trace stored by WithTrace in the context passed
// to the logging call (or bound by FromContext) at the top level of the
// entry, whatever groups the logger has opened.
func NewHandler(w io.Writer, opts *Options) slog.Handler {
	if opts == nil {
		opts = &Options{}
	}
	json := slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level:       opts.Level,
		AddSource:   opts.AddSource,
		ReplaceAttr: replaceAttr,
	})
	return &handler{inner: json}
}

// Severity returns the Cloud Logging severity of a slog level: DEBUG below
// Info, INFO below Warn, WARNING below Error, ERROR from Error up.
func Severity(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "DEBUG"
	case l < slog.LevelWarn:
		return "INFO"
	case l < slog.LevelError:
		return "WARNING"
	default:
		return "ERROR"
	}
}

// replaceAttr renames slog's built-in keys to Cloud Logging's. Only
// top-level attributes are touched so that a caller's own "level" or "msg"
// inside a group stays as written.
func replaceAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.LevelKey:
		if l, ok := a.Value.Any().(slog.Level); ok {
			return slog.String(KeySeverity, Severity(l))
		}
	case slog.MessageKey:
		a.Key = KeyMessage
	case slog.SourceKey:
		if src, ok := a.Value.Any().(*slog.Source); ok {
			// Cloud Logging's LogEntrySourceLocation carries the line as an
			// int64, which its JSON mapping writes as a string.
			return slog.Group(KeySourceLocation,
				slog.String("file", src.File),
				slog.String("line", strconv.Itoa(src.Line)),
				slog.String("function", src.Function))
		}
	}
	return a
}

// handler adds the request's trace to records before the JSON handler
// writes them. Because a trace key must sit at the top level of the entry,
// it keeps the groups opened by WithGroup (and the attributes added inside
// them) itself and nests them into each record, instead of letting the
// inner handler prefix the trace keys with the group. It keeps the
// attributes added by WithAttrs too, so that each entry holds every key
// once (unique): slog's JSON handler writes a key as often as it is given,
// and a function's logger often gets one (such as "function") at two
// layers.
type handler struct {
	inner slog.Handler // the JSON handler, with no attributes of its own
	attrs []slog.Attr  // added before any group
	ops   []groupOrAttrs
	bound *Trace // the trace of the context the logger was taken from
}

// groupOrAttrs is one WithGroup (group != "") or WithAttrs call made after
// the first group was opened.
type groupOrAttrs struct {
	group string
	attrs []slog.Attr
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	c := *h
	if len(h.ops) == 0 {
		c.attrs = append(slices.Clip(h.attrs), attrs...)
		return &c
	}
	c.ops = append(append([]groupOrAttrs(nil), h.ops...), groupOrAttrs{attrs: attrs})
	return &c
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.ops = append(append([]groupOrAttrs(nil), h.ops...), groupOrAttrs{group: name})
	return &c
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	tr, ok := traceFrom(ctx)
	if !ok && h.bound != nil {
		tr, ok = *h.bound, true
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	if ok {
		out.AddAttrs(tr.attrs()...)
	}
	// The caller's keys never meet the trace's: unique renames them.
	out.AddAttrs(unique(append(slices.Clip(h.attrs), h.nest(r)...), true)...)
	return h.inner.Handle(ctx, out)
}

// entryKeys are the keys of an entry's own fields, as slog names them and
// as Cloud Logging does.
var entryKeys = map[string]bool{
	slog.TimeKey: true, slog.LevelKey: true, slog.MessageKey: true, slog.SourceKey: true,
	KeySeverity: true, KeyMessage: true, KeySourceLocation: true,
	KeyTrace: true, KeySpanID: true, KeyTraceSampled: true,
}

// userPrefix renames a caller's top-level attribute that has the key of an
// entry's own field ("message", "logging.googleapis.com/trace", ...).
const userPrefix = "attr_"

// unique returns attrs with every key once, at its first place with its
// last value: a key given again (a logger's With, then the record's own
// attribute) replaces the earlier value, and two groups of one key merge.
// Inline groups (empty key) are spliced in and LogValuers resolved first,
// as slog would, so that nothing reaches the JSON handler twice. At the
// top level (top), an attribute with the key of an entry's own field is
// renamed with userPrefix.
func unique(attrs []slog.Attr, top bool) []slog.Attr {
	out := make([]slog.Attr, 0, len(attrs))
	at := make(map[string]int, len(attrs))
	var add func(a slog.Attr)
	add = func(a slog.Attr) {
		a.Value = a.Value.Resolve()
		if a.Value.Kind() == slog.KindGroup && a.Key == "" {
			for _, g := range a.Value.Group() {
				add(g)
			}
			return
		}
		if a.Key == "" {
			return // slog drops an attribute without a key
		}
		if top && entryKeys[a.Key] {
			a.Key = userPrefix + a.Key
		}
		i, seen := at[a.Key]
		if !seen {
			at[a.Key] = len(out)
			out = append(out, a)
			return
		}
		if out[i].Value.Kind() == slog.KindGroup && a.Value.Kind() == slog.KindGroup {
			merged := append(slices.Clip(out[i].Value.Group()), a.Value.Group()...)
			a.Value = slog.GroupValue(merged...)
		}
		out[i] = a
	}
	for _, a := range attrs {
		add(a)
	}
	for i := range out {
		if out[i].Value.Kind() == slog.KindGroup {
			out[i].Value = slog.GroupValue(unique(out[i].Value.Group(), false)...)
		}
	}
	return out
}

// nest returns the record's attributes wrapped in the groups opened by
// WithGroup, innermost last, with the attributes added at each level.
func (h *handler) nest(r slog.Record) []slog.Attr {
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, a)
		return true
	})
	for i := len(h.ops) - 1; i >= 0; i-- {
		op := h.ops[i]
		if op.group == "" {
			attrs = append(append([]slog.Attr(nil), op.attrs...), attrs...)
			continue
		}
		attrs = []slog.Attr{{Key: op.group, Value: slog.GroupValue(attrs...)}}
	}
	return attrs
}

type loggerKey struct{}

// NewContext returns a copy of ctx carrying l, for FromContext.
func NewContext(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// FromContext returns the logger stored in ctx by NewContext, or
// slog.Default() if there is none. If ctx carries a trace (WithTrace) and
// the logger is one of this package's, the returned logger adds that trace
// even to records logged without a context (Info rather than InfoContext).
func FromContext(ctx context.Context) *slog.Logger {
	l, ok := ctx.Value(loggerKey{}).(*slog.Logger)
	if !ok || l == nil {
		l = slog.Default()
	}
	tr, ok := traceFrom(ctx)
	if !ok {
		return l
	}
	h, ok := l.Handler().(*handler)
	if !ok {
		return l
	}
	c := *h
	c.bound = &tr
	return slog.New(&c)
}

// With returns a copy of ctx whose logger (FromContext) has args added, so
// that resource keys such as "tenantId" and "clusterId" are attached once
// and appear on every later record of the request.
func With(ctx context.Context, args ...any) context.Context {
	return NewContext(ctx, FromContext(ctx).With(args...))
}
