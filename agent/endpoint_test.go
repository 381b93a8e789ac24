package agent

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/scripts/testpki"
)

// TestAdmin_HTTPS serves the admin endpoint with admin_tls and a client CA
// as the agent starts it:
// a client with a certificate from that CA gets answers over HTTPS, one
// without a certificate is refused in the handshake, and the CLI's client
// (adminClient, pinned to admin_tls.cert) gets through.
func TestAdmin_HTTPS(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "admin")
	cert, key := ca.Issue(t, "gateway")
	a := mustBuildAgent(t, testConfig, true)
	a.cfg.Agent.Admin = "127.0.0.1:0"
	a.cfg.Agent.AdminTLS = &config.AdminTLS{Cert: cert, Key: key, ClientCA: ca.CAFile}
	opts, err := adminOptions(a.cfg, a.log, a.intro)
	if err != nil {
		t.Fatal(err)
	}
	srv, stop, err := a.intro.Listen(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	url := "https://" + srv.Addr() + "/healthz"

	clientCert, clientKey := ca.Issue(t, "operator")
	get := func(tc *tls.Config) (int, error) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
		resp, err := c.Get(url)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get(ca.ClientTLS(t, clientCert, clientKey)); err != nil || code != http.StatusOK {
		t.Fatalf("with a client certificate: %d, %v", code, err)
	}
	if _, err := get(ca.ClientTLS(t, "", "")); err == nil {
		t.Fatal("without a client certificate: answered, want the handshake refused")
	}
	if resp, err := http.Get("http://" + srv.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered 200")
		}
	}
	cli, scheme, err := adminClient(a.cfg.Agent.AdminTLS)
	if err != nil || scheme != "https" {
		t.Fatalf("adminClient: %q, %v", scheme, err)
	}
	resp, err := cli.Get(strings.Replace(url, "https", scheme, 1))
	if err != nil {
		t.Fatalf("the CLI's client: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the CLI's client: %d", resp.StatusCode)
	}
}
