package agent

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/agent/introspect"
	"github.com/eddy-edge/eddy/config"
)

// adminEndpoint is agent { admin } for one run: run starts it once
// checkpoints are set up, or a state rebuild that waits for disk space
// starts it earlier, so /readyz can say why; whichever comes first wins.
// Run closes it.
type adminEndpoint struct {
	cfg  *config.Config
	log  *slog.Logger
	view *introspect.View
	srv  *admin.Server // nil until started, and when agent { admin } is off
	stop func()        // stops the endpoint and the view's sampling
}

// adminOptions are the admin endpoint's options from agent { admin,
// admin_token, admin_hosts, admin_tls } and the checkpoint timeout.
func adminOptions(cfg *config.Config, log *slog.Logger, view *introspect.View) (admin.Options, error) {
	tc, err := adminTLSConfig(cfg.Agent.AdminTLS)
	if err != nil {
		return admin.Options{}, fmt.Errorf("agent: admin_tls: %w", err)
	}
	return admin.Options{
		Listen: cfg.Agent.Admin, Hosts: cfg.Agent.AdminHosts, Token: cfg.Agent.AdminToken, TLS: tc,
		// Twice the checkpoint timeout, by which the coordinator has
		// aborted the savepoint.
		SavepointTimeout: 2 * cfg.Checkpoint.Timeout,
		Log:              log,
		Now:              func() time.Time { return view.Now() },
	}, nil
}

// startOnce starts the endpoint, if configured and not started yet.
func (e *adminEndpoint) startOnce() error {
	if e.cfg.Agent.Admin == "" || e.srv != nil {
		return nil
	}
	opts, err := adminOptions(e.cfg, e.log, e.view)
	if err != nil {
		return err
	}
	srv, stop, err := e.view.Listen(opts)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	e.srv, e.stop = srv, stop
	return nil
}

// close stops the endpoint, if started.
func (e *adminEndpoint) close() {
	if e.stop != nil {
		e.stop()
	}
}

// addr is the endpoint's address, or "" when it is off.
func (e *adminEndpoint) addr() string {
	if e.srv == nil {
		return ""
	}
	return e.srv.Addr()
}
