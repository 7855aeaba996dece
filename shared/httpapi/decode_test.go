package httpapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/better-compute/kubernetes/shared/errs"
)

func TestDecodeJSON(t *testing.T) {
	type inner struct {
		Count int `json:"count"`
	}
	type body struct {
		Name  string   `json:"name"`
		Tags  []string `json:"tags"`
		Inner inner    `json:"inner"`
		On    bool     `json:"on"`
	}
	tests := []struct {
		body      string
		wantField string // the field named in details
		wantMsg   string // a fragment of the message, without details
	}{
		{`{"name":"a","tags":["x"],"inner":{"count":2},"on":true}`, "", ""},
		{``, "", "empty"},
		{`[1]`, "", "must be a JSON object, not an array"},
		{`"x"`, "", "must be a JSON object, not a string"},
		{`{"name":1}`, "name", ""},
		{`{"inner":{"count":1.5}}`, "inner.count", ""},
		{`{"inner":"x"}`, "inner", ""},
		{`{"tags":{}}`, "tags", ""},
		{`{"bogus":1}`, "bogus", ""},
		{`{"name":`, "", "unexpected end"},
		{`{"name":"a"} {}`, "", "data after the object"},
		{`{"name" "a"}`, "", "malformed JSON at byte"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			var v body
			err := DecodeJSON([]byte(tt.body), &v)
			if tt.wantField == "" && tt.wantMsg == "" {
				if err != nil {
					t.Fatalf("DecodeJSON = %v, want nil", err)
				}
				return
			}
			var e *errs.Error
			if !errors.As(err, &e) || e.Kind != errs.Invalid {
				t.Fatalf("DecodeJSON = %v, want an INVALID_INPUT error", err)
			}
			shown := e.Message
			for _, f := range e.Fields {
				shown += " " + f.Field + ": " + f.Reason
			}
			if strings.Contains(shown, "Go ") || strings.Contains(shown, "struct") || strings.Contains(shown, "interface") || strings.Contains(shown, "json:") {
				t.Errorf("DecodeJSON shows %q: it names Go", shown)
			}
			if tt.wantField != "" && (len(e.Fields) != 1 || e.Fields[0].Field != tt.wantField) {
				t.Errorf("DecodeJSON details = %+v, want one naming %s", e.Fields, tt.wantField)
			}
			if !strings.Contains(e.Message, tt.wantMsg) {
				t.Errorf("DecodeJSON message = %q, want it to hold %q", e.Message, tt.wantMsg)
			}
		})
	}
}
