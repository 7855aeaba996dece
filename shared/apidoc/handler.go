package apidoc

import (
	"net/http"
	"strconv"
)

// Where Handler serves the documents.
const (
	OpenAPIPath  = "/openapi.json"
	AsyncAPIPath = "/asyncapi.json"
)

// Handler serves GET (and HEAD) OpenAPIPath and AsyncAPIPath; any other
// request gets 404. It needs no configuration and does no I/O.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var doc []byte
		switch r.URL.Path {
		case OpenAPIPath:
			doc = OpenAPI()
		case AsyncAPIPath:
			doc = AsyncAPI()
		default:
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
		w.Header().Set("Cache-Control", "public, max-age=300")
		if r.Method == http.MethodGet {
			_, _ = w.Write(doc)
		}
	})
}

// Serves reports whether Handler serves r's path.
func Serves(path string) bool { return path == OpenAPIPath || path == AsyncAPIPath }
