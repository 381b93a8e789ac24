package upload

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeS3 is an httptest server whose handler the test sets; it records the
// requests it saw.
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

// s3On returns an s3 for the fake server with test credentials and no
// pause between retries.
func s3On(t *testing.T, f *fakeS3, edit func(*Options)) *s3 {
	t.Helper()
	o := Options{Endpoint: f.srv.URL, Bucket: "bkt", AccessKey: "AK", SecretKey: "SK", PathStyle: true}
	if edit != nil {
		edit(&o)
	}
	o, err := o.normalize()
	if err != nil {
		t.Fatal(err)
	}
	s, err := newS3(o, resolveCredentials(o, credentialSource{getenv: func(string) string { return "" }}), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.retryWait = 0
	return s
}

func s3ErrorBody(code, msg string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>` + msg +
		`</Message><Resource>/bkt</Resource><RequestId>R1</RequestId></Error>`
}

func TestUsePathStyle(t *testing.T) {
	cases := []struct {
		o    Options
		want bool
	}{
		{Options{Endpoint: "s3.eu-west-1.amazonaws.com", Bucket: "b", Secure: true}, false},
		{Options{Endpoint: "s3.amazonaws.com:443", Bucket: "b", Secure: true}, false},
		{Options{Endpoint: "s3.amazonaws.com", Bucket: "a.b", Secure: true}, true},
		{Options{Endpoint: "s3.amazonaws.com", Bucket: "b", PathStyle: true}, true},
		{Options{Endpoint: "minio.local:9000", Bucket: "b"}, true},
		{Options{Endpoint: "10.0.0.1:9000", Bucket: "b"}, true},
	}
	for _, tc := range cases {
		if got := usePathStyle(tc.o); got != tc.want {
			t.Errorf("usePathStyle(%+v) = %v, want %v", tc.o, got, tc.want)
		}
	}
}

func TestS3_URL(t *testing.T) {
	path := &s3{scheme: "http", endpoint: "h:9000", bucket: "bkt", pathStyle: true}
	vhost := &s3{scheme: "https", endpoint: "s3.amazonaws.com", bucket: "bkt"}
	cases := []struct {
		s    *s3
		key  string
		want string
	}{
		{path, "", "http://h:9000/bkt/"},
		{path, "dev 1/files/a$b.snap", "http://h:9000/bkt/dev%201/files/a%24b.snap"},
		{vhost, "", "https://bkt.s3.amazonaws.com/"},
		{vhost, "dev-1/manifests/7.json", "https://bkt.s3.amazonaws.com/dev-1/manifests/7.json"},
	}
	for _, tc := range cases {
		if got := tc.s.url(tc.key, nil).String(); got != tc.want {
			t.Errorf("url(%q) = %s, want %s", tc.key, got, tc.want)
		}
	}
	got := path.url("", map[string][]string{"prefix": {"dev 1/"}, "list-type": {"2"}}).String()
	if want := "http://h:9000/bkt/?list-type=2&prefix=dev%201%2F"; got != want {
		t.Errorf("url with query = %s, want %s", got, want)
	}
}

func TestS3_Retries(t *testing.T) {
	cases := []struct {
		name     string
		statuses []int // answers in order; the last repeats
		wantReqs int
		wantErr  string // "" for success
	}{
		{"503 then ok", []int{503, 200}, 2, ""},
		{"500 twice", []int{500}, 2, "InternalServerError"},
		{"429 then ok", []int{429, 200}, 2, ""},
		{"403 not retried", []int{403}, 1, "AccessDenied"},
		{"404 not retried", []int{404}, 1, "NoSuchKey"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				i := int(n.Add(1)) - 1
				w.WriteHeader(tc.statuses[min(i, len(tc.statuses)-1)])
			})
			_, err := s3On(t, f, nil).headObject(context.Background(), "k")
			if got := len(f.requests()); got != tc.wantReqs {
				t.Fatalf("%d requests, want %d", got, tc.wantReqs)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestS3_ConnectionErrorRetriedOnce(t *testing.T) {
	f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {})
	s := s3On(t, f, nil)
	var tries atomic.Int64
	s.hc.Transport = roundTripFunc(func(*http.Request) (*http.Response, error) {
		tries.Add(1)
		return nil, errors.New("connection refused")
	})
	if _, err := s.headObject(context.Background(), "k"); err == nil || tries.Load() != s3Attempts {
		t.Fatalf("err %v after %d tries, want an error after %d", err, tries.Load(), s3Attempts)
	}
	// A cancelled context is not retried.
	tries.Store(0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.headObject(ctx, "k"); !errors.Is(err, context.Canceled) || tries.Load() > 1 {
		t.Fatalf("cancelled: err %v after %d tries", err, tries.Load())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestClient_Classify pins the mapping of S3 error responses to the
// package's sentinels.
func TestClient_Classify(t *testing.T) {
	cases := []struct {
		name   string
		method string
		status int
		body   string
		key    string
		want   error
	}{
		{"NoSuchKey", "GET", 404, s3ErrorBody("NoSuchKey", "gone"), "k", ErrNotFound},
		{"HEAD 404 object", "HEAD", 404, "", "k", ErrNotFound},
		{"HEAD 404 bucket", "HEAD", 404, "", "", ErrNoBucket},
		{"NoSuchBucket", "GET", 404, s3ErrorBody("NoSuchBucket", "no"), "", ErrNoBucket},
		{"InvalidAccessKeyId", "GET", 403, s3ErrorBody("InvalidAccessKeyId", "who"), "", ErrCredentials},
		{"SignatureDoesNotMatch", "GET", 403, s3ErrorBody("SignatureDoesNotMatch", "sig"), "", ErrCredentials},
		{"XAdminUserNotFound", "GET", 404, s3ErrorBody("XAdminUserNotFound", "No user"), "", ErrCredentials},
		{"ExpiredToken", "GET", 400, s3ErrorBody("ExpiredToken", "old"), "", ErrCredentials},
		{"AccessDenied", "GET", 403, s3ErrorBody("AccessDenied", "no"), "k", ErrAccessDenied},
		{"HEAD 403", "HEAD", 403, "", "k", ErrAccessDenied},
		{"other 400", "GET", 400, s3ErrorBody("InvalidArgument", "bad"), "k", nil},
		{"proxy page 502", "GET", 502, "<html>bad gateway</html>", "k", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			c := &Client{s3: s3On(t, f, nil), bucket: "bkt", endpoint: "fake"}
			var err error
			if tc.key == "" {
				_, _, err = c.s3.listPage(context.Background(), "", "", 1)
			} else if tc.method == "HEAD" {
				_, err = c.s3.headObject(context.Background(), tc.key)
			} else {
				_, _, err = c.s3.getObject(context.Background(), tc.key)
			}
			if tc.method == "HEAD" && tc.key == "" {
				_, err = c.s3.do(context.Background(), s3Request{method: "HEAD"})
			}
			err = c.classify("op", tc.key, err)
			var oe *ObjectError
			if !errors.As(err, &oe) || oe.Kind != tc.want {
				t.Fatalf("classify: %v (kind %v), want kind %v", err, oe.Kind, tc.want)
			}
			var se *s3Error
			if !errors.As(err, &se) || se.StatusCode != tc.status {
				t.Fatalf("cause %v: want the *s3Error with status %d", err, tc.status)
			}
		})
	}
}

func TestS3_ListPaginates(t *testing.T) {
	f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		q := r.URL.Query()
		if q.Get("list-type") != "2" || q.Get("prefix") != "dev-1/files/" {
			w.WriteHeader(400)
			return
		}
		switch q.Get("continuation-token") {
		case "":
			io.WriteString(w, `<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>tok+/=1</NextContinuationToken>`+
				`<Contents><Key>dev-1/files/a</Key><Size>1</Size></Contents><Contents><Key>dev-1/files/b &amp; c</Key></Contents></ListBucketResult>`)
		case "tok+/=1":
			io.WriteString(w, `<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>dev-1/files/d</Key></Contents></ListBucketResult>`)
		default:
			w.WriteHeader(400)
		}
	})
	var keys []string
	if err := s3On(t, f, nil).list(context.Background(), "dev-1/files/", func(k string) { keys = append(keys, k) }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keys, ","); got != "dev-1/files/a,dev-1/files/b & c,dev-1/files/d" {
		t.Fatalf("keys %q", got)
	}
	if n := len(f.requests()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

func TestS3_ListTruncatedWithoutToken(t *testing.T) {
	f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		io.WriteString(w, `<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>`)
	})
	if err := s3On(t, f, nil).list(context.Background(), "", func(string) {}); err == nil {
		t.Fatal("endless listing accepted")
	}
}

func TestS3_DeleteObjects(t *testing.T) {
	f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		sum := md5.Sum(body)
		if r.Method != "POST" || r.URL.RawQuery != "delete=" || r.Header.Get("Content-Md5") != base64.StdEncoding.EncodeToString(sum[:]) {
			w.WriteHeader(400)
			return
		}
		io.WriteString(w, `<DeleteResult><Error><Key>k&lt;7</Key><Code>AccessDenied</Code><Message>no</Message></Error></DeleteResult>`)
	})
	keys := make([]string, 1001)
	for i := range keys {
		keys[i] = fmt.Sprintf("k<%d", i)
	}
	failed, err := s3On(t, f, nil).deleteObjects(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests for 1001 keys, want 2", len(reqs))
	}
	if len(failed) != 2 || failed[0].Key != "k<7" || failed[0].Err.Code != "AccessDenied" {
		t.Fatalf("failed %+v", failed)
	}
}

func TestS3_MakeBucketLocation(t *testing.T) {
	for _, tc := range []struct {
		region, want string
	}{
		{"us-east-1", ""},
		{"eu-west-1", "<LocationConstraint>eu-west-1</LocationConstraint>"},
	} {
		var got string
		f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, body []byte) { got = string(body) })
		if err := s3On(t, f, func(o *Options) { o.Region = tc.region }).makeBucket(context.Background(), tc.region); err != nil {
			t.Fatal(err)
		}
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("region %s: body %q, want %q", tc.region, got, tc.want)
		}
	}
}

func TestS3_PutObjectHeaders(t *testing.T) {
	f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		sum := sha256.Sum256(body)
		auth := r.Header.Get("Authorization")
		switch {
		case r.Header.Get("X-Amz-Content-Sha256") != hex.EncodeToString(sum[:]):
			w.WriteHeader(400)
		case r.ContentLength != int64(len(body)) || r.Header.Get("X-Amz-Meta-Eddy-Size") != "5":
			w.WriteHeader(400)
		case !strings.Contains(auth, "Credential=AK/") || !strings.Contains(auth, "/us-east-1/s3/aws4_request") ||
			!strings.Contains(auth, "x-amz-meta-eddy-size"):
			w.WriteHeader(403)
		}
	})
	s := s3On(t, f, nil)
	var wrapped int
	err := s.putObject(context.Background(), "dev-1/files/x", []byte("hello"), map[string]string{"Eddy-Size": "5"},
		func(r io.Reader) io.Reader { wrapped++; return r })
	if err != nil || wrapped != 1 {
		t.Fatalf("put: %v, body wrapped %d times", err, wrapped)
	}
	// An empty object is sent with Content-Length 0, not chunked.
	f.handler = func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.ContentLength != 0 || len(r.TransferEncoding) != 0 {
			w.WriteHeader(400)
		}
	}
	if err := s.putObject(context.Background(), "k", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestS3_HeadObjectMetadata(t *testing.T) {
	f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("x-amz-meta-eddy-format", "1")
		w.Header().Set("X-Amz-Meta-Eddy-Sha256", "abc")
		w.Header().Set("Content-Length", "42")
	})
	info, err := s3On(t, f, nil).headObject(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != 42 || metaGet(info.UserMetadata, metaFormat) != "1" || metaGet(info.UserMetadata, metaSHA256) != "abc" {
		t.Fatalf("info %+v", info)
	}
}

// TestClient_Check_AdoptsBucketRegion: with Options.Region empty, requests
// are signed for us-east-1 until the server names the bucket's region.
func TestClient_Check_AdoptsBucketRegion(t *testing.T) {
	f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if !strings.Contains(r.Header.Get("Authorization"), "/eu-central-1/s3/") {
			w.Header().Set("X-Amz-Bucket-Region", "eu-central-1")
			w.WriteHeader(400)
			io.WriteString(w, s3ErrorBody("AuthorizationHeaderMalformed", "wrong region"))
			return
		}
		io.WriteString(w, `<ListBucketResult></ListBucketResult>`)
	})
	c, err := New(Options{Endpoint: f.srv.URL, Bucket: "bkt", AccessKey: "AK", SecretKey: "SK", PathStyle: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := c.s3.currentRegion(); got != "eu-central-1" {
		t.Fatalf("region %s", got)
	}
}

// TestClient_MaxBandwidthPacesUploads: the limiter sees every byte of a PUT
// body, in pieces of at most limitChunk.
func TestClient_MaxBandwidthPacesUploads(t *testing.T) {
	f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {})
	c, err := New(Options{Endpoint: f.srv.URL, Bucket: "bkt", AccessKey: "AK", SecretKey: "SK", PathStyle: true, MaxBandwidth: 1 << 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
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

// TestNoSDKImports keeps the package on its own S3 client: an S3 SDK costs
// megabytes of the binary's size budget (minio-go cost about 3.75 MiB).
func TestNoSDKImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if strings.HasPrefix(p, "github.com/minio/") || strings.HasPrefix(p, "github.com/aws/") {
				t.Errorf("%s imports %s", name, p)
			}
		}
	}
}
