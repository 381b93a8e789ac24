package upload

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/s3server"
)

const testBucket = "eddy"

// testEnv is a versitygw server with a bucket and a request-counting
// transport.
type testEnv struct {
	srv      *s3server.Server
	requests *countingTransport
}

func newEnv(t testing.TB) *testEnv {
	t.Helper()
	srv := s3server.Start(t)
	srv.MakeBucket(testBucket)
	return &testEnv{srv: srv, requests: &countingTransport{next: http.DefaultTransport.(*http.Transport).Clone()}}
}

func (e *testEnv) options() Options {
	return Options{
		Endpoint:  e.srv.Endpoint(),
		Bucket:    testBucket,
		Prefix:    "dev-1/",
		Region:    "us-east-1",
		AccessKey: e.srv.AccessKey,
		SecretKey: e.srv.SecretKey,
		PathStyle: true,
		Transport: e.requests,
	}
}

// client returns a Client on the env with opts changed by edit (may be nil).
func (e *testEnv) client(t testing.TB, edit func(*Options)) *Client {
	t.Helper()
	o := e.options()
	if edit != nil {
		edit(&o)
	}
	c, err := New(o, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// objectPath is the file on the server's disk holding object name below the
// test prefix.
func (e *testEnv) objectPath(name string) string {
	return e.srv.ObjectPath(testBucket, "dev-1/"+name)
}

type countingTransport struct {
	next http.RoundTripper
	puts atomic.Int64
	all  atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.all.Add(1)
	if r.Method == http.MethodPut {
		c.puts.Add(1)
	}
	return c.next.RoundTrip(r)
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// writeFile writes data to a file in dir (atomically, as checkpoint files
// are written: a Shipper may be reading the previous one) and returns its
// path and hex SHA-256.
func writeFile(t testing.TB, dir, name string, data []byte) (string, string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p+".tmp", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return p, hex.EncodeToString(sum[:])
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// stateEntries returns n bytes shaped like snapshot entries: key-group,
// device key, window namespace and a few float aggregates, the values
// random-ish so compression is not trivial.
func stateEntries(n int, seed uint64) []byte {
	var b bytes.Buffer
	x := seed | 1
	next := func() uint64 { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x }
	for i := 0; b.Len() < n; i++ {
		r := next()
		b.WriteString("kg=")
		b.WriteByte(byte('0' + r%10))
		b.WriteString(" key=sensor-")
		b.WriteString(hex.EncodeToString([]byte{byte(i >> 16), byte(i >> 8), byte(i)}))
		b.WriteString(" ns=1700000")
		b.WriteString(hex.EncodeToString([]byte{byte(r >> 8), byte(r >> 16)}))
		b.WriteString(" sum=")
		b.WriteString(hex.EncodeToString([]byte{byte(r >> 24), byte(r >> 32), byte(r >> 40), byte(r >> 48)}))
		b.WriteString(" n=")
		b.WriteByte(byte('0' + (r>>56)%10))
		b.WriteByte('\n')
	}
	return b.Bytes()[:n]
}
