package admin

import (
	"net"
	"net/http"
	"net/http/pprof"
)

// handleProfiles registers Go's runtime profiles (net/http/pprof) under
// /debug/pprof/ on mux, the endpoint's protected mux: with a token
// (tokenRequired) they take it like the API. Registered here by hand: the
// endpoint never serves http.DefaultServeMux, where importing
// net/http/pprof also puts them (no server of Eddy's serves that mux).
//
// A profile shows the process's code paths and, in a goroutine dump, values
// on its stacks; a CPU or trace profile also costs the device while it
// runs. So without a token configured (the endpoint on loopback) a profile
// is served only to a request from loopback: one that reached a loopback
// listener through a forward or proxy on the device itself still passes,
// since its peer is loopback too.
func handleProfiles(mux *http.ServeMux, tokenRequired bool) {
	guard := loopbackOnly
	if tokenRequired {
		guard = func(h http.Handler) http.Handler { return h }
	}
	// pprof.Index serves the named profiles (heap, goroutine, allocs,
	// block, mutex, threadcreate) under /debug/pprof/NAME too.
	mux.Handle("GET /debug/pprof/", guard(http.HandlerFunc(pprof.Index)))
	mux.Handle("GET /debug/pprof/cmdline", guard(http.HandlerFunc(pprof.Cmdline)))
	mux.Handle("GET /debug/pprof/profile", guard(http.HandlerFunc(pprof.Profile)))
	mux.Handle("GET /debug/pprof/symbol", guard(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("POST /debug/pprof/symbol", guard(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("GET /debug/pprof/trace", guard(http.HandlerFunc(pprof.Trace)))
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
