// Package apidoctest checks JSON values against the schemas of the API's
// documents (shared/apidoc), for the tests of the API's users: the client,
// the CLI and the documents' own.
package apidoctest

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/better-compute/kubernetes/shared/apidoc"
)

// Document names.
const (
	OpenAPI  = "openapi.json"
	AsyncAPI = "asyncapi.json"
)

var (
	once     sync.Once
	compiler *jsonschema.Compiler
	initErr  error

	mu    sync.Mutex
	cache = map[string]*jsonschema.Schema{}
)

func load() {
	compiler = jsonschema.NewCompiler()
	compiler.DefaultDraft(jsonschema.Draft2020)
	compiler.AssertFormat()
	for name, doc := range map[string][]byte{OpenAPI: apidoc.OpenAPI(), AsyncAPI: apidoc.AsyncAPI()} {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
		if err != nil {
			initErr = fmt.Errorf("parse %s: %w", name, err)
			return
		}
		if err := compiler.AddResource("mem:///"+name, v); err != nil {
			initErr = fmt.Errorf("add %s: %w", name, err)
			return
		}
	}
}

// Schema returns the compiled schema at the JSON pointer ptr of the
// document doc (OpenAPI or AsyncAPI): "/components/schemas/NodePool".
// Formats (date-time) are asserted.
func Schema(doc, ptr string) (*jsonschema.Schema, error) {
	once.Do(load)
	if initErr != nil {
		return nil, initErr
	}
	loc := "mem:///" + doc + "#" + ptr
	mu.Lock()
	defer mu.Unlock()
	if s, ok := cache[loc]; ok {
		return s, nil
	}
	s, err := compiler.Compile(loc)
	if err != nil {
		return nil, err
	}
	cache[loc] = s
	return s, nil
}

// Validate checks the JSON data against the schema at ptr of doc.
func Validate(doc, ptr string, data []byte) error {
	s, err := Schema(doc, ptr)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return s.Validate(v)
}

// ValidateValue checks v (as jsonschema.UnmarshalJSON or encoding/json
// with UseNumber make it) against the schema at ptr of doc.
func ValidateValue(doc, ptr string, v any) error {
	s, err := Schema(doc, ptr)
	if err != nil {
		return err
	}
	return s.Validate(v)
}
