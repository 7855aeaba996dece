// Package client is the Go client of the Better Compute Kubernetes API
// (API.md, /openapi.json): one method per API method a tenant calls (not
// kubernetesSubstrates.join, which bcd calls with a join token) with typed
// requests and answers, errors as values carrying the API's code, field details and
// request ID, and Wait helpers that poll a resource to a state.
//
//	c, err := client.New("http://127.0.0.1:8080", client.WithToken(token))
//	pool, err := c.CreateNodePool(ctx, client.CreateNodePoolRequest{
//		TenantID: "acme", ClusterID: clusterID,
//		NodePoolSpec: client.NodePoolSpec{Name: "gpu", MachineType: "g2-standard-8", NodeCount: 2},
//	})
//	pool, err = c.WaitNodePool(ctx, "acme", clusterID, pool.ID, client.StateReady, nil)
//
// Every call is retried when the API answers UNAVAILABLE, after the
// answer's Retry-After, up to MaxRetries times. A call that got no answer
// at all (the connection failed) is retried only when repeating it is
// harmless: reads, deletes, and creates, which carry an idempotency key
// (one is made for a create that has none, and kept across its retries).
//
// Errors are *Error values with the API's Code, the field Details and the
// RequestID. WaitCluster, WaitNodePool and WaitSubstrate poll to a state
// with backoff and end with a *FailedError (the provider's message) when
// the resource goes error. GetSubstrate, ListSubstrates,
// ListSubstrateNodes and AllSubstrateNodes read pools' substrates;
// PlanSubstrate answers what a pool's substrate would do for a pool.
// Orderer puts events back in their ce-sequence order, as bc events tail
// prints them.
//
// The answers are the resources of shared/resource, the same definitions
// the server marshals and the API's documents are made from.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxRetries is how often a call is retried when the API answers
// UNAVAILABLE, unless WithMaxRetries says otherwise.
const DefaultMaxRetries = 4

// maxRetryAfter caps the wait before a retry, whatever Retry-After says.
const maxRetryAfter = 30 * time.Second

// Client calls the API. It is safe for concurrent use.
type Client struct {
	base       string
	token      func(ctx context.Context) (string, error)
	http       *http.Client
	maxRetries int
	userAgent  string
	// sleep waits d or until ctx ends (tests shorten it).
	sleep func(ctx context.Context, d time.Duration) error
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends the bearer token on every call.
func WithToken(token string) Option {
	return func(c *Client) {
		c.token = func(context.Context) (string, error) { return token, nil }
	}
}

// WithTokenSource asks source for the bearer token of every call (a
// refreshing source returns a fresh one when the last expired).
func WithTokenSource(source func(ctx context.Context) (string, error)) Option {
	return func(c *Client) { c.token = source }
}

// WithHTTPClient makes the calls with hc instead of http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithMaxRetries sets how often a call answered UNAVAILABLE is retried
// (0: never).
func WithMaxRetries(n int) Option { return func(c *Client) { c.maxRetries = max(n, 0) } }

// WithUserAgent sets the User-Agent of the calls.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client of the API at baseURL (http://127.0.0.1:8080 for
// the devstack; the paths /api/compute/... are added to it).
func New(baseURL string, opts ...Option) (*Client, error) {
	baseURL = strings.TrimRight(baseURL, "/")
	if !strings.HasPrefix(baseURL, "http://") && !strings.HasPrefix(baseURL, "https://") {
		return nil, fmt.Errorf("client: base URL %q: want http:// or https://", baseURL)
	}
	c := &Client{
		base:       baseURL,
		http:       http.DefaultClient,
		maxRetries: DefaultMaxRetries,
		userAgent:  "better-compute-go-client/1",
		sleep:      sleepCtx,
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// method is one API method as the client calls it.
type method struct {
	resource, verb string
	// idempotent: repeating the call after a lost answer is harmless.
	idempotent bool
}

func (m method) path() string { return "/api/compute/" + m.resource + "/" + m.verb }

// call posts req to m and decodes the 200 answer into out.
func (c *Client) call(ctx context.Context, m method, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%s.%s: encode the request: %w", m.resource, m.verb, err)
	}
	requestID := newID()
	for attempt := 0; ; attempt++ {
		data, apiErr, err := c.post(ctx, m.path(), body, requestID)
		if err == nil && apiErr == nil {
			if out == nil {
				return nil
			}
			if err := json.Unmarshal(data, out); err != nil {
				return fmt.Errorf("%s.%s: decode the answer: %w", m.resource, m.verb, err)
			}
			return nil
		}
		retry, wait := false, backoff(attempt)
		switch {
		case apiErr != nil:
			if apiErr.Code == CodeUnavailable {
				retry = true
				if apiErr.hasRetryAfter {
					wait = apiErr.RetryAfter
				}
			}
			err = apiErr
		case ctx.Err() != nil:
			return fmt.Errorf("%s.%s: %w", m.resource, m.verb, err)
		default:
			retry = m.idempotent
			err = fmt.Errorf("%s.%s: %w", m.resource, m.verb, err)
		}
		if !retry || attempt >= c.maxRetries {
			return err
		}
		if serr := c.sleep(ctx, min(wait, maxRetryAfter)); serr != nil {
			return err
		}
	}
}

// post sends one attempt. An answer other than 200 is an *Error.
func (c *Client) post(ctx context.Context, path string, body []byte, requestID string) ([]byte, *Error, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set(RequestIDHeader, requestID)
	if c.token != nil {
		tok, err := c.token(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("get a token: %w", err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		return data, nil, nil
	}
	return nil, errorFrom(resp, data), nil
}

// RequestIDHeader carries a call's request ID; the client sends one per
// call (the same on its retries) and the API echoes it.
const RequestIDHeader = "X-Request-Id"

// backoff is the wait before retry attempt+1 when the answer said nothing.
func backoff(attempt int) time.Duration {
	return min(200*time.Millisecond<<attempt, 5*time.Second)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Error codes of the API (API.md §2).
const (
	CodeInvalidInput     = "INVALID_INPUT"
	CodeUnauthenticated  = "UNAUTHENTICATED"
	CodePermissionDenied = "PERMISSION_DENIED"
	CodeNotFound         = "NOT_FOUND"
	CodeConflict         = "CONFLICT"
	CodeInvalidState     = "INVALID_STATE"
	CodeQuotaExceeded    = "QUOTA_EXCEEDED"
	CodeUnsupported      = "UNSUPPORTED"
	CodeUnavailable      = "UNAVAILABLE"
	CodeInternal         = "INTERNAL"
)

// FieldError names one broken input field by its JSON path
// (autoscaling.minNodes, taints[3].effect, labels["team"]); a detail of
// UNAVAILABLE names no field, only the reason OUTCOME_UNKNOWN (whether
// the call was stored could not be learned: retry it with its key).
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// Error is an answer of the API other than 200.
type Error struct {
	StatusCode int
	Code       string // CodeInvalidInput, ...
	Message    string
	Details    []FieldError
	// RequestID is the X-Request-Id of the answer: quote it when asking
	// for help.
	RequestID string
	// RetryAfter is the answer's Retry-After (UNAVAILABLE), or 0.
	RetryAfter time.Duration
	// hasRetryAfter: the answer had a Retry-After (which may be 0).
	hasRetryAfter bool
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Code)
	if e.Message != "" && e.Message != e.Code {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	for _, d := range e.Details {
		if d.Field == "" {
			fmt.Fprintf(&b, "; %s", d.Reason)
			continue
		}
		fmt.Fprintf(&b, "; %s: %s", d.Field, d.Reason)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request %s)", e.RequestID)
	}
	return b.String()
}

// Code returns the API error code of err (an *Error in its chain), or "".
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsCode reports whether err is an *Error with the code.
func IsCode(err error, code string) bool { return err != nil && Code(err) == code }

func errorFrom(resp *http.Response, data []byte) *Error {
	var env struct {
		Error struct {
			Code    string       `json:"code"`
			Message string       `json:"message"`
			Details []FieldError `json:"details"`
		} `json:"error"`
	}
	e := &Error{StatusCode: resp.StatusCode, RequestID: resp.Header.Get(RequestIDHeader)}
	if err := json.Unmarshal(data, &env); err == nil && env.Error.Code != "" {
		e.Code, e.Message, e.Details = env.Error.Code, env.Error.Message, env.Error.Details
	} else {
		// Not the API's envelope: a proxy's page, or no answer body.
		e.Code = codeOfStatus(resp.StatusCode)
		e.Message = strings.TrimSpace(string(data))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200] + "..."
		}
		if e.Message == "" {
			e.Message = resp.Status
		}
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			e.RetryAfter, e.hasRetryAfter = time.Duration(n)*time.Second, true
		} else if t, err := http.ParseTime(s); err == nil {
			e.RetryAfter, e.hasRetryAfter = max(time.Until(t), 0), true
		}
	}
	return e
}

// codeOfStatus guesses the code of an answer without the API's envelope.
func codeOfStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusMethodNotAllowed:
		return CodeInvalidInput
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusForbidden:
		return CodePermissionDenied
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusConflict:
		return CodeConflict
	case http.StatusTooManyRequests:
		return CodeQuotaExceeded
	case http.StatusUnprocessableEntity:
		return CodeUnsupported
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return CodeUnavailable
	}
	return CodeInternal
}

// DevToken asks the devstack at baseURL for a development token for sub
// (POST /dev/token). Only the devstack serves it.
func DevToken(ctx context.Context, baseURL, sub string) (string, error) {
	c, err := New(baseURL)
	if err != nil {
		return "", err
	}
	body, _ := json.Marshal(map[string]string{"sub": sub})
	data, apiErr, err := c.post(ctx, "/dev/token", body, newID())
	if err != nil {
		return "", fmt.Errorf("dev token: %w", err)
	}
	if apiErr != nil {
		return "", fmt.Errorf("dev token: %w", apiErr)
	}
	var out struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.Token == "" {
		return "", fmt.Errorf("dev token: unexpected answer %.100q", data)
	}
	return out.Token, nil
}
