package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/eddy-edge/eddy/agent/admin"
)

// adminOptions are the admin endpoint's options from agent { admin,
// admin_token, admin_hosts, admin_tls } and the checkpoint timeout.
func (a *Agent) adminOptions() (admin.Options, error) {
	tc, err := adminTLSConfig(a.cfg.Agent.AdminTLS)
	if err != nil {
		return admin.Options{}, fmt.Errorf("agent: admin_tls: %w", err)
	}
	return admin.Options{
		Listen: a.cfg.Agent.Admin, Hosts: a.cfg.Agent.AdminHosts, Token: a.cfg.Agent.AdminToken, TLS: tc,
		// Twice the checkpoint timeout, by which the coordinator has
		// aborted the savepoint.
		SavepointTimeout: 2 * a.cfg.Checkpoint.Timeout,
		Log:              a.log,
		Now:              func() time.Time { return a.intro.now() },
	}, nil
}

// startAdmin registers the metrics the endpoint serves and starts it on
// agent { admin }.
func (a *Agent) startAdmin() (*admin.Server, error) {
	opts, err := a.adminOptions()
	if err != nil {
		return nil, err
	}
	a.intro.registerMetrics()
	srv, err := admin.Listen(a.intro, opts)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return srv, nil
}

// startAdminOnce starts the admin endpoint and the timing of source
// disconnections, if configured and not started yet: run starts it once
// checkpoints are set up, or a state rebuild that waits for disk space
// starts it earlier, so /readyz can say why. closeAdmin stops both.
func (a *Agent) startAdminOnce() error {
	if a.cfg.Agent.Admin == "" || a.adminSrv != nil {
		return nil
	}
	srv, err := a.startAdmin()
	if err != nil {
		return err
	}
	ctx, stopSampling := context.WithCancel(context.Background())
	go a.intro.sampleSources(ctx)
	a.adminSrv, a.closeAdminSrv = srv, func() { stopSampling(); srv.Close() }
	return nil
}

// closeAdmin stops the admin endpoint, if started.
func (a *Agent) closeAdmin() {
	if a.closeAdminSrv != nil {
		a.closeAdminSrv()
	}
}
