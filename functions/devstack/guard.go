package devstack

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/httpapi"
)

// The devstack answers this machine's user only (API.md §8): a web page
// the user opens must not be able to drive it. Two checks stand at its
// front:
//
//   - the Host allow-list: a DNS-rebinding page reaches the devstack
//     under the page's own name, which is neither a loopback address,
//     localhost, nor a name the user allowed (-allowed-hosts), so it is
//     refused whatever the route;
//   - JSON-only actions: a page of another origin may send a POST
//     without asking first (a CORS "simple request") only with a form's
//     or plain text's Content-Type; application/json needs a preflight,
//     which the devstack never grants.
//
// The console's forms, which a browser sends as forms, carry a per-page
// token and an Origin check of their own (console/guard.go).

// hostAllowList is who may be named in a request's Host.
type hostAllowList struct {
	names map[string]bool // lowercase, without a port
	addrs map[netip.Addr]bool
}

// newHostAllowList allows loopback addresses, localhost and names, each
// with any port. A name that is an IP address allows that address.
func newHostAllowList(names []string) hostAllowList {
	l := hostAllowList{names: map[string]bool{"localhost": true}, addrs: map[netip.Addr]bool{}}
	for _, n := range names {
		n = strings.ToLower(strings.TrimSpace(n))
		if h, _, err := net.SplitHostPort(n); err == nil {
			n = h
		}
		n = strings.TrimSuffix(strings.TrimPrefix(n, "["), "]")
		if n == "" {
			continue
		}
		if a, err := netip.ParseAddr(n); err == nil {
			l.addrs[a.Unmap()] = true
			continue
		}
		l.names[n] = true
	}
	return l
}

// allows reports whether host (a request's Host: a name or an address,
// with or without a port) is allowed.
func (l hostAllowList) allows(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return false
	}
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		return a.IsLoopback() || l.addrs[a]
	}
	return l.names[strings.ToLower(host)]
}

// guardHost refuses, 403 on every route, a request whose Host the list
// does not allow.
func guardHost(l hostAllowList, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.allows(r.Host) {
			httpapi.WriteError(r.Context(), w, errs.E(errs.PermissionDenied,
				"the devstack answers only requests to a loopback address, localhost or a name of -allowed-hosts, not %q", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireJSON answers 415 to a request of the devstack's own routes
// (/dev/...) that acts and does not say its body is JSON: every POST,
// and any other method that sends a Content-Type (a DELETE without a
// body needs none: no page of another origin may send one unasked).
func requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/dev/") && r.Method != http.MethodGet && r.Method != http.MethodHead &&
			(r.Method == http.MethodPost || r.Header.Get("Content-Type") != "") && !httpapi.RequireJSON(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isLoopbackAddr reports whether a listening address (host:port) takes
// connections from this machine only.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.Unmap().IsLoopback()
}
