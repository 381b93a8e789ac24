package agent

import (
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
