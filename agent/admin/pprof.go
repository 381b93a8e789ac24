package admin

import (
	"fmt"
	"net"
	"net/http"
	"runtime/pprof"
	"strconv"
)

// Go's runtime profiles under /debug/pprof/, in the format `go tool pprof`
// reads (gzipped protobuf; ?debug=1 or 2 for text where the profile has
// one):
//
//	GET /debug/pprof/          the index: the profiles there are
//	GET /debug/pprof/{name}    heap, allocs, goroutine, block, mutex,
//	                           threadcreate
//
// They are served from runtime/pprof rather than net/http/pprof, and
// without a CPU profile: the arm64 binary has a budget of 14 MiB
// (RELEASE.md), which these profiles leave 64 KiB under; the CPU profiler
// would cost another 64 KiB and net/http/pprof's delta profiles,
// symbolizer and execution trace 128 KiB more. They are registered on the
// endpoint's own mux, never on http.DefaultServeMux.

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
	mux.Handle("GET /debug/pprof/{$}", guard(http.HandlerFunc(profileIndex)))
	mux.Handle("GET /debug/pprof/{name}", guard(http.HandlerFunc(namedProfile)))
}

// profileIndex lists the profiles, one link a line.
func profileIndex(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	for _, p := range pprof.Profiles() {
		fmt.Fprintf(w, "%s  %d\n", p.Name(), p.Count())
	}
	fmt.Fprintln(w, "\nAdd ?debug=1 for text; read the others with go tool pprof.")
}

// namedProfile writes the runtime profile {name}.
func namedProfile(w http.ResponseWriter, r *http.Request) {
	p := pprof.Lookup(r.PathValue("name"))
	if p == nil {
		writeError(w, http.StatusNotFound, "no such profile; see /debug/pprof/")
		return
	}
	debug, _ := strconv.Atoi(r.URL.Query().Get("debug"))
	setProfileHeaders(w, p.Name(), debug)
	if err := p.WriteTo(w, debug); err != nil {
		// The headers are out: all that is left is to cut the body short.
		panic(http.ErrAbortHandler)
	}
}

// setProfileHeaders marks a binary profile as a download named for it, and
// a text one (debug > 0) as text.
func setProfileHeaders(w http.ResponseWriter, name string, debug int) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if debug > 0 {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		return
	}
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", `attachment; filename="`+name+`"`) // a runtime profile's name: no quotes
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
