package devissuer

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
	"github.com/better-compute/kubernetes/shared/logging"
)

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
// It checks the method and body with the API's own helpers (httpapi),
// so that errors use the API's envelope: 400 INVALID_INPUT for malformed
// JSON, an unknown field, a missing sub or a bad ttl (with details naming
// the field), 413 for a body over 1 MiB, 405 for another method.
func (i *Issuer) TokenHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if !httpapi.Allow(w, r, http.MethodPost) {
			return
		}
		body, ok := httpapi.ReadBody(ctx, w, r)
		if !ok {
			return
		}
		var req TokenRequest
		if err := httpapi.DecodeJSON(body, &req); err != nil {
			httpapi.WriteError(ctx, w, err)
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
			httpapi.WriteError(ctx, w, errs.InvalidFields(bad))
			return
		}
		aud := req.Aud
		if aud == "" {
			aud = i.audience
		}
		tok, err := i.Token(req.Sub, aud, ttl)
		if err != nil {
			httpapi.WriteError(ctx, w, fmt.Errorf("mint a development token: %w", err))
			return
		}
		logging.FromContext(ctx).InfoContext(ctx, "Minted a development token", "sub", req.Sub, "aud", aud, "ttl", ttl)
		w.Header().Set("Cache-Control", "no-store")
		httpapi.WriteJSON(w, http.StatusOK, TokenResponse{Token: tok})
	})
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
