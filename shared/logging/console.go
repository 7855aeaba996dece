package logging

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// ConsoleOptions configures NewConsoleHandler. The zero value logs at Info
// and above, without colour.
type ConsoleOptions struct {
	// Level is the minimum level logged; nil means slog.LevelInfo.
	Level slog.Leveler
	// Color marks the level with ANSI colours (for a terminal).
	Color bool
}

// NewConsoleHandler returns a handler writing one line a record for a
// person at a terminal: the time, the level, the message, then the
// record's attributes as key=value (groups as group.key), with no source
// location. A string value holding a newline (a stack) is written below
// the line, indented. Production logs use NewHandler (Cloud Logging JSON).
func NewConsoleHandler(w io.Writer, opts *ConsoleOptions) slog.Handler {
	if opts == nil {
		opts = &ConsoleOptions{}
	}
	level := opts.Level
	if level == nil {
		level = slog.LevelInfo
	}
	return &consoleHandler{out: &lockedWriter{w: w}, level: level, color: opts.Color}
}

// NewConsole returns a logger over NewConsoleHandler.
func NewConsole(w io.Writer, level slog.Leveler, color bool) *slog.Logger {
	return slog.New(NewConsoleHandler(w, &ConsoleOptions{Level: level, Color: color}))
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

type consoleHandler struct {
	out   *lockedWriter
	level slog.Leveler
	color bool
	// attrs are those added by WithAttrs, each inside the groups open
	// then, kept to write every key of a line once (unique).
	attrs  []slog.Attr
	groups []string // the open groups
}

func (h *consoleHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

func (h *consoleHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	c := *h
	c.attrs = append(slices.Clip(h.attrs), inGroups(h.groups, attrs)...)
	return &c
}

func (h *consoleHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.groups = append(slices.Clip(h.groups), name)
	return &c
}

// inGroups returns attrs nested in the groups, outermost first.
func inGroups(groups []string, attrs []slog.Attr) []slog.Attr {
	for i := len(groups) - 1; i >= 0 && len(attrs) > 0; i-- {
		attrs = []slog.Attr{{Key: groups[i], Value: slog.GroupValue(attrs...)}}
	}
	return attrs
}

const (
	ansiReset  = "\x1b[0m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiBlue   = "\x1b[34m"
	ansiGray   = "\x1b[90m"
)

func (h *consoleHandler) Handle(_ context.Context, r slog.Record) error {
	var b bytes.Buffer
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	if h.color {
		b.WriteString(ansiDim)
	}
	b.WriteString(t.Format("15:04:05.000"))
	if h.color {
		b.WriteString(ansiReset)
	}
	b.WriteByte(' ')
	lvl, color := levelName(r.Level)
	if h.color {
		b.WriteString(color)
	}
	fmt.Fprintf(&b, "%-5s", lvl)
	if h.color {
		b.WriteString(ansiReset)
	}
	b.WriteByte(' ')
	b.WriteString(r.Message)
	own := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		own = append(own, a)
		return true
	})
	var tails []string
	for _, a := range unique(append(slices.Clip(h.attrs), inGroups(h.groups, own)...), false) {
		tails = appendAttr(&b, "", a, tails)
	}
	b.WriteByte('\n')
	for _, t := range tails {
		for _, line := range strings.Split(strings.TrimRight(t, "\n"), "\n") {
			b.WriteString("    ")
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	_, err := h.out.w.Write(b.Bytes())
	return err
}

func levelName(l slog.Level) (string, string) {
	switch {
	case l < slog.LevelInfo:
		return "DEBUG", ansiGray
	case l < slog.LevelWarn:
		return "INFO", ansiBlue
	case l < slog.LevelError:
		return "WARN", ansiYellow
	default:
		return "ERROR", ansiRed
	}
}

// appendAttr writes " key=value" (groups flattened to group.key); a
// multi-line string is returned in tails, to be written below the line.
func appendAttr(b *bytes.Buffer, prefix string, a slog.Attr, tails []string) []string {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return tails
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			tails = appendAttr(b, p, g, tails)
		}
		return tails
	}
	var s string
	switch a.Value.Kind() {
	case slog.KindTime:
		s = a.Value.Time().Format(time.RFC3339Nano)
	case slog.KindDuration:
		s = a.Value.Duration().String()
	default:
		if err, ok := a.Value.Any().(error); ok {
			s = err.Error()
		} else {
			s = a.Value.String()
		}
	}
	if strings.Contains(s, "\n") {
		return append(tails, prefix+a.Key+":\n"+s)
	}
	b.WriteByte(' ')
	b.WriteString(prefix + a.Key)
	b.WriteByte('=')
	if needsQuote(s) {
		b.WriteString(strconv.Quote(s))
	} else {
		b.WriteString(s)
	}
	return tails
}

func needsQuote(s string) bool {
	if s == "" {
		return true
	}
	for _, r := range s {
		if unicode.IsSpace(r) || r == '"' || r == '=' || !unicode.IsPrint(r) {
			return true
		}
	}
	return false
}
