package upload

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRefreshAt(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		life time.Duration
		want time.Duration // before expiry
	}{
		{"one hour: 5 minutes before", time.Hour, 5 * time.Minute},
		{"12 hours: 5 minutes before", 12 * time.Hour, 5 * time.Minute},
		{"15 minutes: 10% before", 15 * time.Minute, 90 * time.Second},
		{"3 seconds: 10% before", 3 * time.Second, 300 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exp := t0.Add(tc.life)
			if got := exp.Sub(refreshAt(t0, exp)); got != tc.want {
				t.Fatalf("refresh %v before expiry, want %v", got, tc.want)
			}
		})
	}
	if !refreshAt(t0, time.Time{}).IsZero() {
		t.Fatal("credentials without expiry are refreshed")
	}
}

func TestOutage_LogsFirstFailureOnly(t *testing.T) {
	o := outage{bo: backoff{min: time.Second, max: time.Minute}}
	t0 := time.Unix(100, 0)
	var firsts int
	var waits []time.Duration
	for i := range 8 {
		first, wait := o.failed(t0.Add(time.Duration(i)*time.Second), 0)
		if first {
			firsts++
		}
		waits = append(waits, wait)
	}
	if firsts != 1 {
		t.Fatalf("%d failures marked first in one outage, want 1", firsts)
	}
	if waits[0] != 500*time.Millisecond || waits[7] != 30*time.Second {
		t.Fatalf("waits %v: want backoff from 1s (half fixed) to the 1m cap", waits)
	}
	if n, since := o.succeeded(); n != 8 || !since.Equal(t0) {
		t.Fatalf("succeeded: %d failures since %v", n, since)
	}
	if first, _ := o.failed(t0.Add(time.Hour), 0); !first {
		t.Fatal("the first failure after a recovery does not start a new outage")
	}
}

// testPKI is a CA with a server certificate for 127.0.0.1 and a device
// (client) certificate, written as PEM files.
type testPKI struct {
	caFile, certFile, keyFile string
	server                    tls.Certificate
	pool                      *x509.CertPool
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, name string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	}
	p := testPKI{caFile: filepath.Join(dir, "ca.pem"), certFile: filepath.Join(dir, "device.pem"), keyFile: filepath.Join(dir, "device.key")}
	os.WriteFile(p.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600)
	c, k := issue(2, "gw-1", x509.ExtKeyUsageClientAuth)
	os.WriteFile(p.certFile, c, 0o600)
	os.WriteFile(p.keyFile, k, 0o600)
	sc, sk := issue(3, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	if p.server, err = tls.X509KeyPair(sc, sk); err != nil {
		t.Fatal(err)
	}
	p.pool = x509.NewCertPool()
	p.pool.AddCert(ca)
	return p
}

// fakeIoTCredentials plays AWS IoT Core's credentials provider on loopback
// HTTPS: it requires a client certificate of the test CA and the thing-name
// header, and hands out the S3 server's keys valid for life.
type fakeIoTCredentials struct {
	srv  *httptest.Server
	life time.Duration
	down atomic.Bool // answer 503

	mu      sync.Mutex
	fetches []time.Time // successful fetches
	expires []time.Time // the expiration handed out by each
	refused int
}

func newFakeIoTCredentials(t *testing.T, pki testPKI, accessKey, secretKey string, life time.Duration) *fakeIoTCredentials {
	f := &fakeIoTCredentials{life: life}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/role-aliases/eddy-s3/credentials" || r.Header.Get("x-amzn-iot-thingname") != "gw-1" ||
			len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "gw-1" {
			http.Error(w, `{"message":"Access Denied"}`, http.StatusForbidden)
			return
		}
		if f.down.Load() {
			f.mu.Lock()
			f.refused++
			f.mu.Unlock()
			http.Error(w, `{"message":"Service Unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		now := time.Now()
		exp := now.Add(f.life)
		f.mu.Lock()
		f.fetches = append(f.fetches, now)
		f.expires = append(f.expires, exp)
		f.mu.Unlock()
		var ans struct {
			Credentials map[string]string `json:"credentials"`
		}
		ans.Credentials = map[string]string{"accessKeyId": accessKey, "secretAccessKey": secretKey,
			"sessionToken": "", "expiration": exp.UTC().Format(time.RFC3339Nano)}
		json.NewEncoder(w).Encode(ans)
	}))
	f.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pki.server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.pool}
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeIoTCredentials) counts() (fetches, refused int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.fetches), f.refused
}

// lockedBuffer collects log output from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not timing
	}
}

// TestAWSIoTCredentials_RefreshedBeforeExpiryAndOutage: a Shipper whose
// credentials come from an AWS IoT credentials endpoint (loopback HTTPS
// with a client-certificate check) valid for 3 s uploads to versitygw over
// several lifetimes: each fetch comes before the previous credentials
// expire and no upload fails. Then the endpoint is down for longer than a
// lifetime: uploads pause (credentials expired, checkpoints wait), the
// failure is logged once, and when the endpoint is back every checkpoint is
// shipped; none is lost.
func TestAWSIoTCredentials_RefreshedBeforeExpiryAndOutage(t *testing.T) {
	env := newEnv(t)
	pki := newTestPKI(t)
	const life = 3 * time.Second
	iot := newFakeIoTCredentials(t, pki, env.srv.AccessKey, env.srv.SecretKey, life)
	prov, err := NewAWSIoTProvider(AWSIoTOptions{Endpoint: strings.TrimPrefix(iot.srv.URL, "https://"), RoleAlias: "eddy-s3", ThingName: "gw-1",
		CertificateFiles: CertificateFiles{CertFile: pki.certFile, KeyFile: pki.keyFile, CAFile: pki.caFile}})
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o := env.options()
	o.AccessKey, o.SecretKey, o.Credentials = "", "", prov
	c, err := New(o, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var shipped atomic.Int64
	s := NewShipper(c, ShipperOptions{MaxPending: 100, OnUploaded: func(string) { shipped.Add(1) }}, log)
	runShipper(t, s)

	dir := t.TempDir()
	var ids []string
	ship := func() {
		n := len(ids)
		cp := makeCheckpoint(t, dir, n, "f"+itoa(n))
		ids = append(ids, cp.manifest)
		s.Ship(cp.id, cp.manifest, cp.data, cp.files)
	}

	// Several lifetimes of uploads.
	for fetches, _ := iot.counts(); fetches < 4; fetches, _ = iot.counts() {
		ship()
		waitCond(t, "checkpoint shipped", func() bool { return shipped.Load() == int64(len(ids)) })
	}
	iot.mu.Lock()
	for i := 1; i < len(iot.fetches); i++ {
		if !iot.fetches[i].Before(iot.expires[i-1]) {
			t.Errorf("fetch %d at %v, after the previous credentials expired at %v", i, iot.fetches[i], iot.expires[i-1])
		}
	}
	lastExp := iot.expires[len(iot.expires)-1]
	iot.mu.Unlock()
	if st := s.Stats(); st.Failures != 0 {
		t.Fatalf("%d failed uploads while credentials were refreshed: %s", st.Failures, st.LastError)
	}

	// The endpoint goes down past the credentials' expiry.
	iot.down.Store(true)
	waitCond(t, "credentials expired during the outage", func() bool { return time.Now().After(lastExp) })
	before := len(ids)
	ship()
	ship()
	waitCond(t, "two more refused fetches", func() bool { _, r := iot.counts(); return r >= 3 })
	if got := shipped.Load(); got != int64(before) {
		t.Fatalf("%d checkpoints shipped while the credentials were expired, want %d (paused)", got, before)
	}
	iot.down.Store(false)
	waitCond(t, "every checkpoint shipped after the outage", func() bool { return shipped.Load() == int64(len(ids)) })

	if st := s.Stats(); st.Failures != 0 {
		t.Errorf("%d failed uploads, want 0 (uploads wait for credentials): %s", st.Failures, st.LastError)
	}
	if n := logs.count("fetching S3 credentials failed"); n != 1 {
		t.Errorf("the credential outage was logged %d times, want once", n)
	}
	if n := logs.count("S3 credentials fetched again"); n != 1 {
		t.Errorf("the recovery was logged %d times, want once", n)
	}
	if strings.Contains(logs.b.String(), env.srv.SecretKey) {
		t.Error("the secret key appears in the log")
	}
	got, err := c.ListManifests(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("manifests in the bucket %v, want %v", got, ids)
	}
}

// TestAWSIoTCredentials_Refused: a device certificate the endpoint does not
// accept, or a missing file, is a clear error without secrets.
func TestAWSIoTCredentials_Refused(t *testing.T) {
	pki := newTestPKI(t)
	other := newTestPKI(t) // a certificate of another CA
	iot := newFakeIoTCredentials(t, pki, "AK", "SECRETKEY", time.Hour)
	endpoint := strings.TrimPrefix(iot.srv.URL, "https://")
	if _, err := NewAWSIoTProvider(AWSIoTOptions{Endpoint: endpoint, RoleAlias: "eddy-s3",
		CertificateFiles: CertificateFiles{CertFile: filepath.Join(t.TempDir(), "missing.pem"), KeyFile: pki.keyFile}}); err == nil {
		t.Fatal("missing certificate file accepted")
	}
	for _, tc := range []struct {
		name  string
		files CertificateFiles
		thing string
	}{
		{"certificate of another CA", CertificateFiles{CertFile: other.certFile, KeyFile: other.keyFile, CAFile: pki.caFile}, "gw-1"},
		{"wrong thing name", CertificateFiles{CertFile: pki.certFile, KeyFile: pki.keyFile, CAFile: pki.caFile}, "gw-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewAWSIoTProvider(AWSIoTOptions{Endpoint: endpoint, RoleAlias: "eddy-s3", ThingName: tc.thing, CertificateFiles: tc.files})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Retrieve()
			if err == nil || strings.Contains(err.Error(), "SECRETKEY") {
				t.Fatalf("err %v, want a refusal without the secret", err)
			}
			t.Log(err)
		})
	}
}
