package agent

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// admin serves the agent's health, metrics and API on its admin address.
// Config validation refuses a non-loopback address without a token; with a
// token every request must carry "Authorization: Bearer TOKEN".
type admin struct {
	a   *Agent
	srv *http.Server
	ln  net.Listener
}

func startAdmin(a *Agent, addr, token string, log *slog.Logger) (*admin, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errors.Join(errors.New("agent: admin listen on "+addr), err)
	}
	mux := http.NewServeMux()
	ad := &admin{a: a, ln: ln}
	mux.HandleFunc("GET /healthz", ad.healthz)
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		a.metrics.WritePrometheus(w)
	})
	mux.HandleFunc("GET /api/pipelines", ad.pipelines)
	var h http.Handler = mux
	if token != "" {
		h = requireToken(token, mux)
	}
	ad.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := ad.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin server stopped", "err", err)
		}
	}()
	log.Info("admin endpoint listening", "addr", ln.Addr().String())
	return ad, nil
}

// Addr is the address the admin server listens on.
func (ad *admin) Addr() string { return ad.ln.Addr().String() }

func (ad *admin) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = ad.srv.Shutdown(ctx)
}

func (ad *admin) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "ok", "device_id": ad.a.deviceID})
}

type pipelineStatus struct {
	Name         string `json:"name"`
	ReadingsIn   uint64 `json:"readings_in"`
	ResultsOut   uint64 `json:"results_out"`
	Filtered     uint64 `json:"filtered"`
	Late         uint64 `json:"late"`
	Unassigned   uint64 `json:"unassigned"`
	DeadLettered uint64 `json:"dead_lettered"`
	WatermarkMs  *int64 `json:"watermark_ms"`
	Parallelism  int    `json:"parallelism"`
}

func (ad *admin) pipelines(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ad.a.PipelineStatus())
}

func requireToken(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
