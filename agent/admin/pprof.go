package admin

import (
	"net"
	"net/http"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"
)

// Go's runtime profiles, GET /debug/pprof/{name} for heap, allocs,
// goroutine, block, mutex and threadcreate: gzipped protobuf for `go tool
// pprof`, or text with ?debug=1 (2 for goroutine stacks); and GET
// /debug/pprof/profile?seconds=N, a CPU profile of the next N seconds.
//
// They are served from runtime/pprof, bare: the arm64 binary has a size
// budget (RELEASE.md), and net/http/pprof's index, delta profiles,
// symbolizer and execution trace would cost 128 KiB more than these. They
// are registered on the endpoint's own mux, never on http.DefaultServeMux.

// The CPU profile's duration: net/http/pprof's default, and a bound so that
// one request cannot keep the profiler (a few per cent of a core on a
// small device) running for long.
const (
	cpuProfileDefault = 30 * time.Second
	cpuProfileMax     = 60 * time.Second
)

// cpuProfiling is held while a CPU profile is taken: the runtime has one
// CPU profiler, so a second request is refused (409), not queued.
var cpuProfiling sync.Mutex

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
	mux.Handle("GET /debug/pprof/profile", guard(http.HandlerFunc(cpuProfile)))
}

// cpuProfile writes a CPU profile (gzipped protobuf) of the next
// ?seconds=N seconds, 1..60 (default 30), or less if the client goes away.
// One at a time: 409 while another runs, in this handler or elsewhere in
// the process.
func cpuProfile(w http.ResponseWriter, r *http.Request) {
	d := cpuProfileDefault
	if v := r.URL.Query().Get("seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || time.Duration(n)*time.Second > cpuProfileMax {
			writeError(w, http.StatusBadRequest, "seconds: a whole number from 1 to "+strconv.Itoa(int(cpuProfileMax/time.Second)))
			return
		}
		d = time.Duration(n) * time.Second
	}
	if !cpuProfiling.TryLock() {
		writeError(w, http.StatusConflict, "a CPU profile is already being taken; try again when it ends")
		return
	}
	defer cpuProfiling.Unlock()
	w.Header().Set("Content-Type", "application/octet-stream")
	if err := pprof.StartCPUProfile(w); err != nil {
		writeError(w, http.StatusConflict, "the CPU profiler is busy: "+err.Error())
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
	pprof.StopCPUProfile()
}

// namedProfile writes the runtime profile {name}; 404 for a name the
// runtime does not have.
func namedProfile(w http.ResponseWriter, r *http.Request) {
	p := pprof.Lookup(r.PathValue("name"))
	if p == nil {
		writeError(w, http.StatusNotFound, "no such profile: heap, allocs, goroutine, block, mutex, threadcreate or profile (CPU)")
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
