package devstack

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogFormat checks -log-format: text is a line for a person without
// source paths, json (and auto off a terminal) Cloud Logging's JSON.
func TestLogFormat(t *testing.T) {
	for _, tt := range []struct {
		format string
		json   bool
	}{{"text", false}, {"json", true}, {"auto", true}} {
		t.Run(tt.format, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "log")) // not a terminal
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			log, err := newLogger(tt.format, f)
			if err != nil {
				t.Fatalf("newLogger(%q): %v", tt.format, err)
			}
			log.Info("Devstack ready", "api", "http://127.0.0.1:8080")
			b, _ := os.ReadFile(f.Name())
			line := strings.TrimSpace(string(b))
			var entry map[string]any
			isJSON := json.Unmarshal(b, &entry) == nil
			if isJSON != tt.json {
				t.Fatalf("-log-format %s wrote %q, want JSON %v", tt.format, line, tt.json)
			}
			if tt.json && (entry["severity"] != "INFO" || entry["message"] != "Devstack ready") {
				t.Errorf("JSON entry = %v, want Cloud Logging's severity and message", entry)
			}
			if !tt.json && (!strings.Contains(line, "INFO  Devstack ready api=http://127.0.0.1:8080") || strings.Contains(line, ".go:")) {
				t.Errorf("text line = %q, want level, message and key=value, no source", line)
			}
		})
	}
	if _, err := newLogger("xml", os.Stdout); err == nil {
		t.Error("newLogger(xml) = nil error, want one")
	}
}
