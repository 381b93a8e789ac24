package identity

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/eddy-edge/eddy/config"
)

// ClientTLS is a client's TLS config for a tls block (an MQTT source's or
// sink's), or nil without one: what the agent connects with, and so what
// eddy probe connects with too.
func ClientTLS(t *config.TLS) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	tc := &tls.Config{InsecureSkipVerify: t.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		pool, err := CAPool(t.CA)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if t.Cert != "" {
		c, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("load certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}

// CAPool reads a PEM CA bundle: the authorities a tls block trusts.
func CAPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", path)
	}
	return pool, nil
}
