package admin

import (
	"net"
	"net/http"
	"runtime/pprof"
	"strconv"
)

// Go's runtime profiles, GET /debug/pprof/{name} for heap, allocs,
// goroutine, block, mutex and threadcreate: gzipped protobuf for `go tool
// pprof`, or text with ?debug=1 (2 for goroutine stacks).
//
// They are served from runtime/pprof, bare: the arm64 binary has a budget
// of 14 MiB (RELEASE.md) and these profiles take it to within a few KiB of
// it. An index page or response headers crossed it; the CPU profiler would
// cost another 64 KiB, net/http/pprof's delta profiles, symbolizer and
// execution trace 128 KiB more. They are registered on the endpoint's own
// mux, never on http.DefaultServeMux.

// handleProfiles registers the profiles on mux, the endpoint's protected
// mux: with a token (tokenRequired) they take it like the API. A profile
// shows the process's code paths and, in a goroutine dump, values on its
// stacks; so without a token configured (the endpoint on loopback) a
// profile is served only to a request from loopback: one that reached a
// loopback listener through a forward or proxy on the device itself still
// passes, since its peer is loopback too.
func handleProfiles(mux *http.ServeMux, tokenRequired bool) {
	guard := loopbackOnly
	if tokenRequired {
		guard = func(h http.Handler) http.Handler { return h }
	}
	mux.Handle("GET /debug/pprof/{name}", guard(http.HandlerFunc(namedProfile)))
}

// namedProfile writes the runtime profile {name}; 404 for a name the
// runtime does not have.
func namedProfile(w http.ResponseWriter, r *http.Request) {
	p := pprof.Lookup(r.PathValue("name"))
	if p == nil {
		writeError(w, http.StatusNotFound, "no such profile: heap, allocs, goroutine, block, mutex or threadcreate")
		return
	}
	debug, _ := strconv.Atoi(r.URL.Query().Get("debug"))
	_ = p.WriteTo(w, debug) // an error is the client's going away
}

// loopbackOnly answers 403 to a request whose peer is not a loopback
// address and passes the others to next.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fromLoopback(r) {
			writeError(w, http.StatusForbidden, "profiles are served beyond loopback only with agent { admin_token }")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fromLoopback reports whether r's peer is a loopback address.
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
