// Package httpapi is the HTTP edge shared by every API function: POST only,
// a JSON body of at most 1 MiB, the bearer token, the error envelope and
// status codes of API.md §2; and Edge, which every request of a process
// passes through once: request IDs, one structured log line per call, and
// panics recovered with a generic answer. Allow, ReadBody and DecodeJSON
// are those checks on their own, for the other endpoints that answer as
// the API does (the reconciler's functions, the devstack's own routes).
//
// The order of checks is API.md §3's: the token (401, with a
// WWW-Authenticate: Bearer challenge) before a byte of the body is read,
// then the input's shape (a body not declared application/json: 415,
// decoding: 400, a body over 1 MiB: 413);
// membership, lookups, permission and business rules are the method's
// own, in that order.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/logging"
)

// MaxBody is the largest request body accepted (API.md §1).
const MaxBody = 1 << 20

// Authenticator verifies an Authorization header and returns the caller's
// principal, or an errs.Unauthenticated error.
type Authenticator interface {
	Verify(ctx context.Context, authorization string) (string, error)
}

// Method is one API method: how to decode its body and what to do with it.
// Decode returns an errs.Invalid error naming every broken field; Call
// returns the response body, or a domain error.
type Method[In any] struct {
	Name   string // e.g. "kubernetesNodePools.create", for logs
	Decode func(body []byte) (In, error)
	Call   func(ctx context.Context, principal string, in In) (any, error)
}

// Handler serves m over HTTP. It gives no request ID and recovers no
// panic: serve it through Edge, as every function is.
func Handler[In any](auth Authenticator, m Method[In]) (http.Handler, error) {
	if auth == nil || m.Decode == nil || m.Call == nil || m.Name == "" {
		return nil, errors.New("httpapi: Handler needs an authenticator and a complete method")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(logging.With(r.Context(), "method", m.Name), w, r, auth, m)
	}), nil
}

// RequestIDHeader carries a request's ID, echoed on its answer (API.md §1).
const RequestIDHeader = "X-Request-Id"

// maxRequestID is the longest request ID taken from a caller; a longer one
// is replaced, so that logs stay bounded.
const maxRequestID = 128

// Edge wraps h in what every request of a process passes through exactly
// once, whichever function or route serves it:
//
//   - X-Request-Id: the request's own (up to 128 characters) or a new one,
//     set on the answer and attached to the request's logger as
//     "requestId";
//   - a panic in h is recovered: the stack goes to the log and, if nothing
//     was answered yet, the caller gets 500 INTERNAL in the error envelope
//     (http.ErrAbortHandler is re-raised, as net/http expects);
//   - one "Served request" log line with the status and the duration.
//
// The request's context should carry the logger (logging.NewContext) and
// trace (logging.WithTrace) of the process; functions/cloudrun puts them
// there.
func Edge(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(RequestIDHeader)
		if id == "" || len(id) > maxRequestID {
			id = newRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		ctx := logging.With(r.Context(), "requestId", id)
		rw := &StatusWriter{ResponseWriter: w}
		defer func() {
			p := recover()
			if p == http.ErrAbortHandler {
				panic(p)
			}
			log := logging.FromContext(ctx)
			if p != nil {
				log.Error("Panic serving request", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if rw.Status == 0 {
					WriteError(ctx, rw, errs.E(errs.Internal, "internal error"))
				}
			}
			log.Info("Served request", "httpMethod", r.Method, "path", r.URL.Path, "status", rw.Status, "durationMs", time.Since(start).Milliseconds())
		}()
		h.ServeHTTP(rw, r.WithContext(ctx))
	})
}

func serve[In any](ctx context.Context, w http.ResponseWriter, r *http.Request, auth Authenticator, m Method[In]) {
	if !Allow(w, r, http.MethodPost) {
		return
	}
	// The token first, before a byte of the body is read (API.md §3): an
	// unauthenticated caller gets 401 whatever it sends.
	authorization := r.Header.Get("Authorization")
	principal, err := auth.Verify(ctx, authorization)
	if err != nil {
		if errs.Is(err, errs.Unauthenticated) && authorization != "" {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		}
		WriteError(ctx, w, err)
		return
	}
	ctx = logging.With(ctx, "principal", principal)
	// A body is JSON and says so (API.md §1); anything else, curl -d's
	// form type and no Content-Type included, is 415, before the body is
	// read.
	if !RequireJSON(w, r) {
		return
	}
	body, ok := ReadBody(ctx, w, r)
	if !ok {
		return
	}
	in, err := m.Decode(body)
	if err != nil {
		WriteError(ctx, w, err)
		return
	}
	out, err := m.Call(ctx, principal, in)
	if err != nil {
		WriteError(ctx, w, err)
		return
	}
	WriteJSON(w, http.StatusOK, out)
}

// Allow reports whether r's method is method (or HEAD, for GET, as
// net/http serves it), and otherwise answers 405 INVALID_INPUT in the
// error envelope with an Allow header (API.md §1).
func Allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || method == http.MethodGet && r.Method == http.MethodHead {
		return true
	}
	allow := method
	if method == http.MethodGet {
		allow = "GET, HEAD"
	}
	w.Header().Set("Allow", allow)
	writeEnvelope(w, http.StatusMethodNotAllowed, errs.E(errs.Invalid, "method %s not allowed: use %s", r.Method, method))
	return false
}

// RequireJSON reports whether r's body is declared JSON: a Content-Type
// of media type application/json, whatever its parameters (charset).
// Otherwise it answers 415 INVALID_INPUT in the error envelope, with
// Accept: application/json (RFC 9110 §15.5.16), and returns false.
func RequireJSON(w http.ResponseWriter, r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return true
	}
	w.Header().Set("Accept", "application/json")
	msg := "the request body must be JSON, sent with Content-Type: application/json"
	if ct == "" {
		msg += "; the request has no Content-Type"
	}
	writeEnvelope(w, http.StatusUnsupportedMediaType, errs.E(errs.Invalid, "%s", msg))
	return false
}

// ReadBody reads r's body, at most MaxBody bytes. When it cannot, it
// answers (413 INVALID_INPUT for a longer body, API.md §1; 400 when the
// body cannot be read) and returns false.
func ReadBody(ctx context.Context, w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeEnvelope(w, http.StatusRequestEntityTooLarge, errs.E(errs.Invalid, "request body is larger than %d bytes", MaxBody))
			return nil, false
		}
		WriteError(ctx, w, errs.Wrap(errs.Invalid, err, "cannot read the request body"))
		return nil, false
	}
	return body, true
}

// Status returns the HTTP status of an error kind (API.md §2).
func Status(k errs.Kind) int {
	switch k {
	case errs.Invalid:
		return http.StatusBadRequest
	case errs.Unauthenticated:
		return http.StatusUnauthorized
	case errs.PermissionDenied:
		return http.StatusForbidden
	case errs.NotFound:
		return http.StatusNotFound
	case errs.Conflict, errs.InvalidState:
		return http.StatusConflict
	case errs.Quota:
		return http.StatusTooManyRequests
	case errs.Unsupported:
		return http.StatusUnprocessableEntity
	case errs.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// WriteError answers with err in the error envelope. Only domain errors
// show their message; anything else is INTERNAL with a generic message, and
// the cause goes to the log.
func WriteError(ctx context.Context, w http.ResponseWriter, err error) {
	var de *errs.Error
	if !errors.As(err, &de) {
		de = &errs.Error{Kind: errs.Internal, Err: err}
	}
	log := logging.FromContext(ctx)
	switch de.Kind {
	case errs.Internal:
		log.Error("Internal error", "error", err)
		de = &errs.Error{Kind: errs.Internal, Message: "internal error"}
	case errs.Unauthenticated:
		// RFC 6750 §3: a 401 names the scheme; serve adds the error code
		// when a token was presented and refused.
		if w.Header().Get("WWW-Authenticate") == "" {
			w.Header().Set("WWW-Authenticate", "Bearer")
		}
	case errs.Unavailable:
		log.Warn("Backing service unavailable; the caller may retry", "error", err)
		w.Header().Set("Retry-After", "1")
	}
	writeEnvelope(w, Status(de.Kind), de)
}

type envelope struct {
	Error body `json:"error"`
}

type body struct {
	Code    string            `json:"code"`
	Message string            `json:"message"`
	Details []errs.FieldError `json:"details,omitempty"`
}

func writeEnvelope(w http.ResponseWriter, status int, e *errs.Error) {
	msg := e.Message
	if msg == "" {
		msg = e.Kind.Code()
	}
	WriteJSON(w, status, envelope{Error: body{Code: e.Kind.Code(), Message: msg, Details: e.Fields}})
}

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"INTERNAL","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// StatusWriter records the status of an answer, so that a panic after
// the header was written does not write a second one, and logs can say
// what was answered.
type StatusWriter struct {
	http.ResponseWriter
	Status int // 0 until the answer starts
}

// WriteHeader records the first status written.
func (w *StatusWriter) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
