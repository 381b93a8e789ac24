package admin

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
)

// allowedHosts are the names a request's Host header may carry: the listen
// address's host, "localhost", the configured admin_hosts, and any IP
// literal. A browser sends the name it resolved, so a page whose name was
// rebound to this device (DNS rebinding) sends its own name, which is none
// of these; an IP literal only arrives from someone who addressed this
// device (or another one) by number, which no page can make a browser do
// while keeping its own origin.
type allowedHosts struct {
	listen string   // host:port
	names  []string // admin_hosts
}

// allows reports whether hostport (a Host header: name or IP, optional
// port) is allowed. The port is not compared: a request reached this
// listener, whatever port a proxy or forward made it carry.
func (h allowedHosts) allows(hostport string) bool {
	host := hostport
	if hst, _, err := net.SplitHostPort(hostport); err == nil {
		host = hst
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return false
	}
	if net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") {
		return true
	}
	if lh, _, err := net.SplitHostPort(h.listen); err == nil && strings.EqualFold(host, lh) {
		return true
	}
	return slices.ContainsFunc(h.names, func(n string) bool { return strings.EqualFold(host, n) })
}

// guardRequests refuses, with 403, a request whose Host is not allowed and
// a state-changing request (POST) from another origin: the browser's
// Sec-Fetch-Site, or else its Origin against Host, decides
// (http.CrossOriginProtection); a client that sends neither (curl, eddy
// savepoint) is no browser and passes.
func guardRequests(hosts allowedHosts, next http.Handler) http.Handler {
	sameOrigin := http.NewCrossOriginProtection().Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts.allows(r.Host) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("host %q is not this admin endpoint; add it to agent { admin_hosts }", r.Host))
			return
		}
		sameOrigin.ServeHTTP(w, r)
	})
}

// requireToken answers 401 to a request without "Authorization: Bearer
// token" and passes the others to next.
func requireToken(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hasToken(r, want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="eddy"`)
			writeError(w, http.StatusUnauthorized, "unauthorized: send Authorization: Bearer <admin_token>")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorized reports whether r carries the admin token, or none is set.
func (s *Server) authorized(r *http.Request) bool {
	return s.opts.Token == "" || hasToken(r, []byte("Bearer "+s.opts.Token))
}

// hasToken compares in constant time, so the answer's timing tells nothing
// of the token.
func hasToken(r *http.Request, want []byte) bool {
	return subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) == 1
}
