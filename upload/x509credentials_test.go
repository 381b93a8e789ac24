package upload

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/iotcredentials"
	"github.com/eddy-edge/eddy/scripts/testpki"
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
	pki := testpki.New(t, "gw-1")
	const life = 3 * time.Second
	iot := iotcredentials.Start(t, pki, "gw-1", "eddy-s3", env.srv.AccessKey, env.srv.SecretKey, life)
	prov, err := NewAWSIoTProvider(AWSIoTOptions{Endpoint: iot.Endpoint(), RoleAlias: "eddy-s3", ThingName: "gw-1",
		CertificateFiles: CertificateFiles{CertFile: pki.CertFile, KeyFile: pki.KeyFile, CAFile: pki.CAFile}})
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
	for fetches, _ := iot.Counts(); fetches < 4; fetches, _ = iot.Counts() {
		ship()
		await.True(t, 90*time.Second, "checkpoint shipped", func() bool { return shipped.Load() == int64(len(ids)) })
	}
	at, expires := iot.Fetches()
	for i := 1; i < len(at); i++ {
		if !at[i].Before(expires[i-1]) {
			t.Errorf("fetch %d at %v, after the previous credentials expired at %v", i, at[i], expires[i-1])
		}
	}
	lastExp := expires[len(expires)-1]
	if st := s.Stats(); st.Failures != 0 {
		t.Fatalf("%d failed uploads while credentials were refreshed: %s", st.Failures, st.LastError)
	}

	// The endpoint goes down past the credentials' expiry.
	iot.SetDown(true)
	await.True(t, 90*time.Second, "credentials expired during the outage", func() bool { return time.Now().After(lastExp) })
	before := len(ids)
	ship()
	ship()
	await.True(t, 90*time.Second, "two more refused fetches", func() bool { _, r := iot.Counts(); return r >= 3 })
	if got := shipped.Load(); got != int64(before) {
		t.Fatalf("%d checkpoints shipped while the credentials were expired, want %d (paused)", got, before)
	}
	iot.SetDown(false)
	await.True(t, 90*time.Second, "every checkpoint shipped after the outage", func() bool { return shipped.Load() == int64(len(ids)) })

	if st := s.Stats(); st.Failures != 0 {
		t.Errorf("%d failed uploads, want 0 (uploads wait for credentials): %s", st.Failures, st.LastError)
	}
	if n := logs.count("fetching S3 credentials failed"); n != 1 {
		t.Errorf("the credential outage was logged %d times, want once", n)
	}
	if n := logs.count("S3 credentials fetched again"); n != 1 {
		t.Errorf("the recovery was logged %d times, want once", n)
	}
	if logs.count(env.srv.SecretKey) > 0 {
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
	pki := testpki.New(t, "gw-1")
	other := testpki.New(t, "gw-1") // a certificate of another CA
	iot := iotcredentials.Start(t, pki, "gw-1", "eddy-s3", "AK", "SECRETKEY", time.Hour)
	endpoint := iot.Endpoint()
	if _, err := NewAWSIoTProvider(AWSIoTOptions{Endpoint: endpoint, RoleAlias: "eddy-s3",
		CertificateFiles: CertificateFiles{CertFile: filepath.Join(t.TempDir(), "missing.pem"), KeyFile: pki.KeyFile}}); err == nil {
		t.Fatal("missing certificate file accepted")
	}
	for _, tc := range []struct {
		name  string
		files CertificateFiles
		thing string
	}{
		{"certificate of another CA", CertificateFiles{CertFile: other.CertFile, KeyFile: other.KeyFile, CAFile: pki.CAFile}, "gw-1"},
		{"wrong thing name", CertificateFiles{CertFile: pki.CertFile, KeyFile: pki.KeyFile, CAFile: pki.CAFile}, "gw-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewAWSIoTProvider(AWSIoTOptions{Endpoint: endpoint, RoleAlias: "eddy-s3", ThingName: tc.thing, CertificateFiles: tc.files})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.RetrieveWithCredContext(nil)
			if err == nil || strings.Contains(err.Error(), "SECRETKEY") {
				t.Fatalf("err %v, want a refusal without the secret", err)
			}
			t.Log(err)
		})
	}
}

// TestMinIOCertificateCredentials_Upload: minio-go's AssumeRoleWithCertificate
// provider, built by NewMinIOCertificateProvider, presents the device
// certificate to an STS endpoint (loopback HTTPS standing in for MinIO's,
// which checks the certificate) and the keys it gets upload to versitygw.
func TestMinIOCertificateCredentials_Upload(t *testing.T) {
	env := newEnv(t)
	pki := testpki.New(t, "gw-1")
	var calls atomic.Int64
	sts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Query().Get("Action") != "AssumeRoleWithCertificate" ||
			len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "gw-1" {
			http.Error(w, "<Error><Code>AccessDenied</Code></Error>", http.StatusForbidden)
			return
		}
		calls.Add(1)
		fmt.Fprintf(w, `<AssumeRoleWithCertificateResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithCertificateResult><Credentials>`+
			`<AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey><SessionToken></SessionToken><Expiration>%s</Expiration>`+
			`</Credentials></AssumeRoleWithCertificateResult></AssumeRoleWithCertificateResponse>`,
			env.srv.AccessKey, env.srv.SecretKey, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}))
	sts.TLS = &tls.Config{Certificates: []tls.Certificate{pki.Server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.Pool}
	sts.StartTLS()
	t.Cleanup(sts.Close)

	prov, err := NewMinIOCertificateProvider(MinIOCertificateOptions{Endpoint: sts.URL,
		CertificateFiles: CertificateFiles{CertFile: pki.CertFile, KeyFile: pki.KeyFile, CAFile: pki.CAFile}})
	if err != nil {
		t.Fatal(err)
	}
	c := env.client(t, func(o *Options) { o.AccessKey, o.SecretKey, o.Credentials = "", "", prov })
	t.Cleanup(c.Close)
	if err := c.PutManifest(ctxT(t), "1.json", []byte(`{"id":1}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetManifest(ctxT(t), "1.json"); err != nil || string(got) != `{"id":1}` {
		t.Fatalf("GetManifest = %q, %v", got, err)
	}
	if calls.Load() != 1 {
		t.Fatalf("%d STS calls for credentials valid an hour, want 1", calls.Load())
	}
}

// scriptedProvider fails its first `failures` retrievals, then hands out
// keys valid for an hour.
type scriptedProvider struct {
	failures int
	calls    atomic.Int64
}

func (p *scriptedProvider) RetrieveWithCredContext(*credentials.CredContext) (credentials.Value, error) {
	if int(p.calls.Add(1)) <= p.failures {
		return credentials.Value{}, fmt.Errorf("endpoint unreachable")
	}
	return credentials.Value{AccessKeyID: "AK", SecretAccessKey: "SK", Expiration: time.Now().Add(time.Hour), SignerType: credentials.SignatureV4}, nil
}
func (p *scriptedProvider) Retrieve() (credentials.Value, error) {
	return p.RetrieveWithCredContext(nil)
}
func (p *scriptedProvider) IsExpired() bool { return true }

// TestCredentialKeeper_WaitsThroughFailures (unit): wait blocks while
// fetches fail, returns once one succeeds; the outage is logged once and
// minio-go is handed the new keys.
func TestCredentialKeeper_WaitsThroughFailures(t *testing.T) {
	var logs lockedBuffer
	k := newCredentialKeeper(&scriptedProvider{failures: 2}, http.DefaultClient, slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(k.close)
	if !k.IsExpired() {
		t.Fatal("no keys yet, but not expired")
	}
	if _, err := k.Retrieve(); err == nil {
		t.Fatal("keys handed out before any fetch")
	}
	if err := k.wait(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	v, err := k.Retrieve()
	if err != nil || v.AccessKeyID != "AK" || k.IsExpired() {
		t.Fatalf("after wait: %q, %v, expired %v", v.AccessKeyID, err, k.IsExpired())
	}
	if n := logs.count("fetching S3 credentials failed"); n != 1 {
		t.Fatalf("two failed fetches logged %d times, want once", n)
	}
	if n := logs.count("S3 credentials fetched again"); n != 1 {
		t.Fatalf("recovery logged %d times, want once", n)
	}
}
