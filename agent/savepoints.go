package agent

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/state/vfs"
)

// RemoveSavepoint removes savepoint id from the local checkpoint store of
// the configuration at cfgPath (`eddy savepoint rm`), with the files only it
// references, and returns how many files went. It is safe while the agent
// runs: checkpoints never build on a savepoint. A copy already uploaded to
// S3 stays there.
func RemoveSavepoint(cfgPath string, id uint64) (int, error) {
	cfg, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		return 0, errors.New("invalid configuration:\n" + strings.TrimRight(config.FormatDiagnostics(diags), "\n"))
	}
	store, err := checkpoint.OpenStore(vfs.Default, filepath.Join(cfg.Agent.DataDir, "checkpoints"))
	if err != nil {
		return 0, err
	}
	files, err := store.RemoveSavepoint(id)
	return len(files), err
}

// adminClient is the HTTP client and URL scheme with which the CLI reaches
// the agent's own admin endpoint. With admin_tls it trusts exactly the
// configured certificate (pinned: the CLI reads the same file the agent
// serves, whatever names it holds) and presents it as its client
// certificate, which a client CA accepts when it issued that certificate
// for client authentication too.
func adminClient(t *config.AdminTLS) (*http.Client, string, error) {
	if t == nil {
		return http.DefaultClient, "http", nil
	}
	pair, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, "", fmt.Errorf("admin_tls: load certificate: %w", err)
	}
	want := pair.Certificate[0]
	tc := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification is the pin below, not a CA and host name.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], want) {
				return errors.New("the admin endpoint's certificate is not admin_tls.cert")
			}
			return nil
		},
	}
	if t.ClientCA != "" {
		tc.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}, "https", nil
}
