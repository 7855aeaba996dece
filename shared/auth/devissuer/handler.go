package devissuer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/logging"
)

// maxBody is the API's request size limit (API.md §1).
const maxBody = 1 << 20

// TokenRequest is the body of POST /dev/token. Unknown fields are refused.
type TokenRequest struct {
	// Sub is the principal the token is for; required.
	Sub string `json:"sub"`
	// Aud is the token's audience; empty means the issuer's default.
	Aud string `json:"aud,omitempty"`
	// TTL is the token's lifetime as a Go duration ("15m"), in (0, 24h];
	// empty means the issuer's default.
	TTL string `json:"ttl,omitempty"`
}

// TokenResponse is the body of a successful POST /dev/token.
type TokenResponse struct {
	Token string `json:"token"`
}

// TokenHandler serves POST /dev/token: {"sub": "alice"} → {"token": "<JWT>"}.
// Errors use the API's envelope: 400 INVALID_INPUT for malformed JSON, an
// unknown field, a missing sub or a bad ttl (with details naming the
// field), 413 for a body over 1 MiB, 405 for another method.
func (i *Issuer) TokenHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, errs.E(errs.Invalid, "method %s not allowed; use POST", r.Method))
			return
		}
		req, err := decode(w, r)
		if err != nil {
			status := http.StatusBadRequest
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				status = http.StatusRequestEntityTooLarge
			}
			writeError(w, status, err)
			return
		}
		ttl := i.ttl
		var bad []errs.FieldError
		if strings.TrimSpace(req.Sub) == "" {
			bad = append(bad, errs.FieldError{Field: "sub", Reason: "required"})
		}
		if req.TTL != "" {
			d, err := time.ParseDuration(req.TTL)
			if err != nil || d <= 0 || d > MaxTTL {
				bad = append(bad, errs.FieldError{Field: "ttl", Reason: fmt.Sprintf("a duration such as \"15m\", more than 0 and at most %v", MaxTTL)})
			}
			ttl = d
		}
		if len(bad) > 0 {
			writeError(w, http.StatusBadRequest, errs.InvalidFields(bad))
			return
		}
		aud := req.Aud
		if aud == "" {
			aud = i.audience
		}
		tok, err := i.Token(req.Sub, aud, ttl)
		if err != nil {
			logging.FromContext(r.Context()).ErrorContext(r.Context(), "Minting a development token failed", "error", err)
			writeError(w, http.StatusInternalServerError, errs.E(errs.Internal, "internal error"))
			return
		}
		logging.FromContext(r.Context()).InfoContext(r.Context(), "Minted a development token", "sub", req.Sub, "aud", aud, "ttl", ttl)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(TokenResponse{Token: tok})
	})
}

// decode reads one strict JSON object: no unknown fields, nothing after it.
func decode(w http.ResponseWriter, r *http.Request) (*TokenRequest, error) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	var req TokenRequest
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, errs.Wrap(errs.Invalid, err, "request body over %d bytes", maxBody)
		}
		return nil, errs.Wrap(errs.Invalid, err, "malformed JSON body: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errs.E(errs.Invalid, "malformed JSON body: data after the object")
	}
	return &req, nil
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string            `json:"code"`
	Message string            `json:"message"`
	Details []errs.FieldError `json:"details,omitempty"`
}

// writeError writes err in the API's error envelope (API.md §2).
func writeError(w http.ResponseWriter, status int, err error) {
	body := errorBody{Error: errorDetail{Code: errs.Internal.Code(), Message: "internal error"}}
	var e *errs.Error
	if errors.As(err, &e) {
		body.Error = errorDetail{Code: e.Kind.Code(), Message: e.Message, Details: e.Fields}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// Server is an Issuer serving its documents and POST /dev/token on its own
// listener, for tests and emulators that need an issuer of their own.
type Server struct {
	*Issuer
	srv *http.Server
	ln  net.Listener
}

// Start listens on addr ("127.0.0.1:0" for any free port), creates an
// Issuer whose URL is that listener's, and serves Handler and TokenHandler
// until Close.
func Start(addr string, opts ...Option) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("devissuer: listen %s: %w", addr, err)
	}
	iss, err := New("http://"+ln.Addr().String(), opts...)
	if err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(TokenPath, iss.TokenHandler())
	mux.Handle("/", iss.Handler())
	s := &Server{Issuer: iss, ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("Development issuer stopped serving", "addr", ln.Addr().String(), "error", err)
		}
	}()
	return s, nil
}

// Close stops the server at once, closing open connections.
func (s *Server) Close() error { return s.srv.Close() }
