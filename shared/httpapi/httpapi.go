// Package httpapi is the HTTP edge shared by every API function: POST only,
// a JSON body of at most 1 MiB, the bearer token, the error envelope and
// status codes of API.md §2, request IDs, one structured log line per call,
// and panics recovered with a generic answer.
//
// The order of checks is API.md §3's: the token (401, with a
// WWW-Authenticate: Bearer challenge) before a byte of the body is read,
// then the input's shape (a JSON Content-Type and decoding: 400, a body
// over 1 MiB: 413); membership, lookups, permission and business rules are
// the method's own, in that order.
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
	"strings"
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

// Handler serves m over HTTP.
func Handler[In any](auth Authenticator, m Method[In]) (http.Handler, error) {
	if auth == nil || m.Decode == nil || m.Call == nil || m.Name == "" {
		return nil, errors.New("httpapi: Handler needs an authenticator and a complete method")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 128 {
			id = newRequestID()
		}
		w.Header().Set("X-Request-Id", id)
		ctx := logging.With(r.Context(), "requestId", id, "method", m.Name)
		rw := &StatusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				logging.FromContext(ctx).Error("Panic serving request", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if rw.Status == 0 {
					WriteError(ctx, rw, errs.E(errs.Internal, "internal error"))
				}
			}
			logging.FromContext(ctx).Info("Served request", "status", rw.Status, "durationMs", time.Since(start).Milliseconds())
		}()
		serve(ctx, rw, r, auth, m)
	}), nil
}

func serve[In any](ctx context.Context, w http.ResponseWriter, r *http.Request, auth Authenticator, m Method[In]) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeEnvelope(w, http.StatusMethodNotAllowed, errs.E(errs.Invalid, "method %s not allowed: use POST", r.Method))
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
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		WriteError(ctx, w, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeEnvelope(w, http.StatusRequestEntityTooLarge, errs.E(errs.Invalid, "request body is larger than %d bytes", MaxBody))
			return
		}
		WriteError(ctx, w, errs.Wrap(errs.Invalid, err, "cannot read the request body"))
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

// checkContentType accepts a body declared as JSON (API.md §1):
// application/json, with no parameter but charset=utf-8 (RFC 8259 §8.1).
// A body sent as anything else (a form, text) is refused rather than
// guessed at.
func checkContentType(v string) error {
	refuse := func() error {
		return errs.E(errs.Invalid, "the request body must be sent with Content-Type: application/json")
	}
	if v == "" {
		return refuse()
	}
	mt, params, err := mime.ParseMediaType(v)
	if err != nil || mt != "application/json" {
		return refuse()
	}
	for k, p := range params {
		if k != "charset" || !strings.EqualFold(p, "utf-8") {
			return refuse()
		}
	}
	return nil
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
