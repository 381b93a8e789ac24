package admin

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
)

// Agent is the running agent as the endpoint sees it. Every method must be
// safe for concurrent use: each request calls them on its own goroutine,
// while the agent runs.
type Agent interface {
	// DeviceID is the agent's device id.
	DeviceID() string
	// Readiness decides readiness now.
	Readiness() Readiness
	// Pipelines reports every pipeline, in configuration order.
	Pipelines() []PipelineReport
	// Checkpoints reports the checkpoint statistics and recent history; ok
	// is false while checkpoints are not set up.
	Checkpoints() (rep CheckpointReport, ok bool)
	// Report is the device, sources, WAL, upload and disk sections.
	Report() AgentReport
	// WriteMetrics writes every metric in the Prometheus text format.
	WriteMetrics(w io.Writer)
	// Savepoint takes a savepoint and returns its id once it is complete.
	// It returns ctx's error when ctx ends first, an error wrapping
	// ErrNotStarted or ErrTooManySavepoints when it cannot be taken, one
	// wrapping checkpoint.ErrCoordinatorFailed once checkpoints have failed
	// for good, and any other error when it was aborted.
	Savepoint(ctx context.Context) (id uint64, err error)
}

// Errors an Agent's Savepoint returns, which the endpoint answers with
// their own status codes.
var (
	// ErrNotStarted is returned while checkpoints are not set up: 503.
	ErrNotStarted = errors.New("checkpoints are not started")
	// ErrTooManySavepoints is returned when max_savepoints are kept: 409.
	ErrTooManySavepoints = errors.New("too many savepoints")
)

// Options configure the endpoint.
type Options struct {
	// Listen is the configured listen address (agent { admin }): its host
	// is one of the names a request's Host may carry.
	Listen string
	// Hosts are further names a request's Host may carry (admin_hosts).
	Hosts []string
	// Token, when set, is required as "Authorization: Bearer TOKEN" by
	// every route but the probes and the status page's shell and assets.
	Token string
	// TLS, when set, makes Serve answer HTTPS only (admin_tls).
	TLS *tls.Config
	// SavepointTimeout bounds POST /api/savepoint beyond the client's own
	// deadline; zero means 2 minutes.
	SavepointTimeout time.Duration
	// Log receives the endpoint's own lines; nil discards them.
	Log *slog.Logger
	// Now is the wall clock of the status page's "updated" time; nil means
	// time.Now.
	Now func() time.Time
}

// Server serves the endpoint for one Agent.
type Server struct {
	a       Agent
	opts    Options
	log     *slog.Logger
	handler http.Handler
	srv     *http.Server
	ln      net.Listener
}

// New builds the endpoint's handler for a, without listening.
func New(a Agent, opts Options) *Server {
	if opts.SavepointTimeout <= 0 {
		opts.SavepointTimeout = 2 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{a: a, opts: opts, log: opts.Log}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	api := http.NewServeMux()
	api.HandleFunc("GET /metrics", s.metrics)
	api.HandleFunc("GET /api/pipelines", s.pipelines)
	api.HandleFunc("GET /api/checkpoints", s.checkpoints)
	api.HandleFunc("POST /api/savepoint", s.savepoint)
	api.HandleFunc("GET /api/agent", s.agentInfo)
	handleProfiles(api, opts.Token != "")
	var protected http.Handler = api
	if opts.Token != "" {
		protected = requireToken(opts.Token, api)
	}
	mux := http.NewServeMux()
	mux.Handle("/", protected)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /{$}", s.statusPage)
	mux.Handle("GET /static/", staticAssets())
	s.handler = guardRequests(allowedHosts{listen: opts.Listen, names: opts.Hosts}, mux)
	return s
}

// Handler is the endpoint's handler, for a server of the caller's.
func (s *Server) Handler() http.Handler { return s.handler }

// Listen listens on opts.Listen and serves the endpoint for a until Close.
func Listen(a Agent, opts Options) (*Server, error) {
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("admin: listen on %s: %w", opts.Listen, err)
	}
	if opts.TLS != nil {
		ln = tls.NewListener(ln, opts.TLS)
	}
	s := New(a, opts)
	s.ln = ln
	s.srv = &http.Server{Handler: s.handler, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin server stopped", "err", err)
		}
	}()
	s.log.Info("admin endpoint listening", "addr", ln.Addr().String(), "https", opts.TLS != nil)
	return s, nil
}

// Addr is the address the server listens on; "" for a Server from New.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops a server from Listen, waiting up to 2 s for requests in
// flight.
func (s *Server) Close() {
	if s.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if ready, _ := strconv.ParseBool(r.URL.Query().Get("ready")); ready {
		s.readyz(w, r)
		return
	}
	if !s.authorized(r) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "device_id": s.a.DeviceID()})
}

// readyz answers without the token (probes carry none), but then only
// whether the agent is ready: the checks name sources and errors.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	rd := s.a.Readiness()
	code := http.StatusOK
	if !rd.Ready {
		code = http.StatusServiceUnavailable
	}
	if !s.authorized(r) {
		writeJSON(w, code, map[string]bool{"ready": rd.Ready})
		return
	}
	writeJSON(w, code, rd)
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	s.a.WriteMetrics(w)
}

func (s *Server) pipelines(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.a.Pipelines())
}

func (s *Server) checkpoints(w http.ResponseWriter, r *http.Request) {
	rep, ok := s.a.Checkpoints()
	if !ok {
		writeError(w, http.StatusServiceUnavailable, ErrNotStarted.Error())
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// savepoint takes a savepoint and answers {"id": n} once it is complete.
// Errors: 503 when checkpoints are not running or have failed for good,
// 504 when it does not complete in time, 409 when max_savepoints are kept,
// 500 when it was aborted.
func (s *Server) savepoint(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.SavepointTimeout)
	defer cancel()
	id, err := s.a.Savepoint(ctx)
	switch {
	case err == nil:
		s.log.Info("savepoint taken on request", "id", id)
		writeJSON(w, http.StatusOK, map[string]uint64{"id": id})
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, "savepoint did not complete in time: "+err.Error())
	case errors.Is(err, context.Canceled):
		writeError(w, http.StatusServiceUnavailable, "savepoint request cancelled: "+err.Error())
	case errors.Is(err, ErrNotStarted), errors.Is(err, checkpoint.ErrCoordinatorFailed):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, ErrTooManySavepoints):
		writeError(w, http.StatusConflict, err.Error())
	default:
		s.log.Warn("savepoint on request failed", "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

func (s *Server) agentInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.a.Report())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
