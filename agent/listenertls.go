package agent

import (
	"crypto/tls"
	"fmt"

	"github.com/eddy-edge/eddy/agent/identity"
	"github.com/eddy-edge/eddy/config"
)

// The listeners' TLS (the embedded broker's, the admin endpoint's) is the
// agent's alone; the clients' is package identity's, which eddy probe
// shares.

// serverTLSConfig is a listener's TLS config with certFile and keyFile;
// with clientCA, a client certificate issued by it is required and
// verified.
func serverTLSConfig(certFile, keyFile, clientCA string) (*tls.Config, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load certificate: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pool, err := identity.CAPool(clientCA)
		if err != nil {
			return nil, err
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// adminTLSConfig is the admin listener's TLS config, or nil without
// admin_tls. With a client CA a client certificate issued by it is
// required.
func adminTLSConfig(t *config.AdminTLS) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	return serverTLSConfig(t.Cert, t.Key, t.ClientCA)
}
