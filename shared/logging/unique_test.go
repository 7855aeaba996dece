package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

// duplicateKeys returns the keys that one JSON object of line, at any
// depth, holds more than once (encoding/json keeps the last silently).
func duplicateKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	var dups []string
	var object func(path string)
	var value func(path string)
	value = func(path string) {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("read %q: %v", line, err)
		}
		switch tok {
		case json.Delim('{'):
			object(path)
		case json.Delim('['):
			for dec.More() {
				value(path + "[]")
			}
			if _, err := dec.Token(); err != nil {
				t.Fatal(err)
			}
		}
	}
	object = func(path string) {
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			k := tok.(string)
			if seen[k] {
				dups = append(dups, path+k)
			}
			seen[k] = true
			value(path + k + ".")
		}
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
	}
	value("")
	return dups
}

type groupValuer struct{}

func (groupValuer) LogValue() slog.Value {
	return slog.GroupValue(slog.String("function", "valuer"), slog.Int("n", 1))
}

// No entry holds a key twice, whatever the layers of a logger give it:
// the last value of a key wins, groups of one key merge, and a caller's
// key of an entry's own field is renamed.
func TestEntryKeysUnique(t *testing.T) {
	ctx := ContextWithTrace(context.Background(), Trace{Project: "p", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"})
	tests := []struct {
		name string
		log  func(l *slog.Logger)
		want map[string]any // some keys of the entry
	}{
		{"function at two layers", func(l *slog.Logger) {
			// As the Cloud Run layer and then the pool events function do.
			c := With(NewContext(context.Background(), l), "function", "kubernetesSubstrates-poolEvents")
			FromContext(c).With("function", "kubernetesSubstrates-poolEvents", "eventId", "e1").Info("m")
		}, map[string]any{"function": "kubernetesSubstrates-poolEvents", "eventId": "e1"}},
		{"with then record", func(l *slog.Logger) {
			l.With("function", "a", "n", 1).Info("m", "function", "b")
		}, map[string]any{"function": "b", "n": 1.0}},
		{"twice in one record", func(l *slog.Logger) { l.Info("m", "k", 1, "k", 2) }, map[string]any{"k": 2.0}},
		{"inline group", func(l *slog.Logger) {
			l.With("function", "a").Info("m", slog.Group("", "function", "b"))
		}, map[string]any{"function": "b"}},
		{"valuer", func(l *slog.Logger) {
			l.With("v", "x").Info("m", slog.Any("v", groupValuer{}))
		}, map[string]any{"v": map[string]any{"function": "valuer", "n": 1.0}}},
		{"groups merge", func(l *slog.Logger) {
			l.Info("m", slog.Group("g", "a", 1, "a", 2), slog.Group("g", "b", 3))
		}, map[string]any{"g": map[string]any{"a": 2.0, "b": 3.0}}},
		{"inside an open group", func(l *slog.Logger) {
			l.WithGroup("g").With("a", 1).With("a", 2).Info("m", "a", 3)
		}, map[string]any{"g": map[string]any{"a": 3.0}}},
		{"entry keys", func(l *slog.Logger) {
			l.With("message", "x", "time", "t").InfoContext(ctx, "m", "msg", "y", "level", slog.LevelError,
				"severity", "s", KeyTrace, "mine", "source", "src")
		}, map[string]any{
			KeyMessage: "m", KeySeverity: "INFO", KeyTrace: "projects/p/traces/4bf92f3577b34da6a3ce929d0e0e4736",
			"attr_message": "x", "attr_time": "t", "attr_msg": "y", "attr_level": "ERROR", "attr_severity": "s",
			"attr_" + KeyTrace: "mine", "attr_source": "src",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tt.log(New(&buf, slog.LevelInfo))
			line := strings.TrimSpace(buf.String())
			if strings.Count(line, "\n") != 0 {
				t.Fatalf("want one entry, got %q", line)
			}
			if d := duplicateKeys(t, line); len(d) > 0 {
				t.Errorf("entry %s holds %v more than once", line, d)
			}
			e := decode(t, &buf)[0]
			for k, want := range tt.want {
				if got := e[k]; !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %v, want %v (entry %s)", k, got, want, line)
				}
			}
		})
	}
}

// A key given at every layer is still written once.
func BenchmarkEntryWithAttrs(b *testing.B) {
	var buf bytes.Buffer
	l := New(&buf, slog.LevelInfo).With("function", "f", "tenantId", "acme", "clusterId", "kcl_1")
	for i := 0; b.Loop(); i++ {
		buf.Reset()
		l.Info("Served request", "status", 200, "n", i)
	}
	if !strings.Contains(buf.String(), `"function":"f"`) {
		b.Fatal(buf.String())
	}
}
