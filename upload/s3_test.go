package upload

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeS3 is an httptest server whose handler the test sets; it records the
// requests it saw. Unit tests only: the versitygw tests are the real ones.
type fakeS3 struct {
	srv     *httptest.Server
	handler func(w http.ResponseWriter, r *http.Request, body []byte)

	mu   sync.Mutex
	seen []*http.Request
}

func newFakeS3(t *testing.T, h func(w http.ResponseWriter, r *http.Request, body []byte)) *fakeS3 {
	t.Helper()
	f := &fakeS3{handler: h}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.seen = append(f.seen, r)
		f.mu.Unlock()
		f.handler(w, r, body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeS3) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.seen...)
}

// clientOn returns a Client for the fake server with test credentials.
func clientOn(t *testing.T, f *fakeS3, edit func(*Options)) *Client {
	t.Helper()
	o := Options{Endpoint: f.srv.URL, Bucket: "bkt", Region: "us-east-1", AccessKey: "AK", SecretKey: "SK", PathStyle: true}
	if edit != nil {
		edit(&o)
	}
	c, err := New(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func s3ErrorBody(code, msg string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>` + msg +
		`</Message><Resource>/bkt</Resource><RequestId>R1</RequestId></Error>`
}

// TestClient_Classify pins the mapping of S3 error responses, as minio-go
// reports them, to the package's sentinels, with S3's code in the text.
func TestClient_Classify(t *testing.T) {
	cases := []struct {
		name   string
		op     string // "list", "head", "get"
		status int
		body   string
		want   error
		says   string
	}{
		{"NoSuchKey", "get", 404, s3ErrorBody("NoSuchKey", "gone"), ErrNotFound, "NoSuchKey"},
		{"HEAD 404 object", "head", 404, "", ErrNotFound, "NoSuchKey"},
		{"NoSuchBucket", "list", 404, s3ErrorBody("NoSuchBucket", "no"), ErrNoBucket, "NoSuchBucket"},
		{"InvalidAccessKeyId", "list", 403, s3ErrorBody("InvalidAccessKeyId", "who"), ErrCredentials, "InvalidAccessKeyId"},
		{"SignatureDoesNotMatch", "list", 403, s3ErrorBody("SignatureDoesNotMatch", "sig"), ErrCredentials, "SignatureDoesNotMatch"},
		{"XAdminUserNotFound", "list", 404, s3ErrorBody("XAdminUserNotFound", "No user"), ErrCredentials, "XAdminUserNotFound"},
		{"ExpiredToken", "list", 400, s3ErrorBody("ExpiredToken", "old"), ErrCredentials, "ExpiredToken"},
		{"AccessDenied", "get", 403, s3ErrorBody("AccessDenied", "no"), ErrAccessDenied, "AccessDenied"},
		{"HEAD 403", "head", 403, "", ErrAccessDenied, "AccessDenied"},
		{"other 400", "get", 400, s3ErrorBody("InvalidArgument", "bad"), nil, "InvalidArgument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			c := clientOn(t, f, nil)
			ctx := context.Background()
			var err error
			switch tc.op {
			case "list":
				err = c.s3.probe(ctx, "")
			case "head":
				_, err = c.s3.headObject(ctx, "k")
			case "get":
				_, _, err = c.s3.getObject(ctx, "k")
			}
			err = c.classify("op", "k", err)
			var oe *ObjectError
			if !errors.As(err, &oe) || oe.Kind != tc.want || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("classify: %v, want kind %v saying %q", err, tc.want, tc.says)
			}
		})
	}
}

// TestClient_RetriesServerErrors: minio-go retries a 503 and the operation
// succeeds.
func TestClient_RetriesServerErrors(t *testing.T) {
	var n atomic.Int64
	f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if n.Add(1) == 1 {
			w.WriteHeader(503)
			io.WriteString(w, s3ErrorBody("SlowDown", "busy"))
		}
	})
	c := clientOn(t, f, nil)
	if err := c.putObject(context.Background(), "k", []byte("hello"), nil); err != nil {
		t.Fatal(err)
	}
	if got := len(f.requests()); got != 2 {
		t.Fatalf("%d requests, want 2 (one retry)", got)
	}
	// The retried body was sent again and counted again.
	if st := c.Stats(); st.BytesUploaded < 2*int64(len("hello")) {
		t.Fatalf("bytes uploaded %d, want both attempts counted", st.BytesUploaded)
	}
}

// TestClient_AddressingStyle: path style with Options.PathStyle, virtual
// hosts on AWS's endpoints otherwise (minio-go's rule, which also picks
// AWS's dual-stack endpoints).
func TestClient_AddressingStyle(t *testing.T) {
	cases := []struct {
		opts Options
		want string
	}{
		{Options{Endpoint: "s3.eu-west-1.amazonaws.com", Bucket: "bkt", Region: "eu-west-1", Secure: true}, "https://bkt.s3.dualstack.eu-west-1.amazonaws.com/dev-1/k"},
		{Options{Endpoint: "s3.eu-west-1.amazonaws.com", Bucket: "bkt", Region: "eu-west-1", Secure: true, PathStyle: true}, "https://s3.dualstack.eu-west-1.amazonaws.com/bkt/dev-1/k"},
		{Options{Endpoint: "minio.local:9000", Bucket: "bkt", Region: "us-east-1"}, "http://minio.local:9000/bkt/dev-1/k"},
	}
	for _, tc := range cases {
		var got string
		tc.opts.AccessKey, tc.opts.SecretKey = "AK", "SK"
		tc.opts.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
			got = r.URL.Scheme + "://" + r.URL.Host + r.URL.Path
			return nil, errors.New("offline")
		})
		c, err := New(tc.opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		c.s3.headObject(ctx, "dev-1/k")
		cancel()
		if got != tc.want {
			t.Errorf("%+v: request to %s, want %s", tc.opts, got, tc.want)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestClient_MaxBandwidthPacesUploads: the limiter sees every byte of a PUT
// body that minio-go sends.
func TestClient_MaxBandwidthPacesUploads(t *testing.T) {
	f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {})
	c := clientOn(t, f, func(o *Options) { o.MaxBandwidth = 1 << 20 })
	var mu sync.Mutex
	var slept time.Duration
	c.up.sleep = func(_ context.Context, d time.Duration) error {
		mu.Lock()
		slept += d
		mu.Unlock()
		return nil
	}
	now := time.Unix(0, 0)
	c.up.now = func() time.Time { return now } // time stands still: every byte waits
	body := make([]byte, 256<<10)
	if err := c.putObject(context.Background(), "k", body, nil); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.BytesUploaded != int64(len(body)) {
		t.Fatalf("bytes uploaded %d, want %d", st.BytesUploaded, len(body))
	}
	// 256 KiB at 1 MiB/s is 250ms, less the 100ms burst credit.
	if slept < 100*time.Millisecond {
		t.Fatalf("slept %v for 256 KiB at 1 MiB/s", slept)
	}
}
