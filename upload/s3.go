package upload

// A minimal S3 client on net/http: the seven operations this package needs
// (list objects v2, create bucket, put, head, get, multi-object delete),
// signed with SigV4 (sigv4.go). It replaces minio-go, whose dependency tree
// cost about 3.75 MiB of the stripped binary. It knows nothing of the
// package's framing, metadata or sentinels; Client maps its *s3Error to
// those (errors.go).

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

const (
	// s3Attempts is how often a request is tried when the connection
	// fails or the server answers 5xx or 429. Kept small on purpose: the
	// Shipper retries with its own backoff, and more tries here would hold
	// an operation for minutes while the uplink is down.
	s3Attempts = 2
	// s3RetryWait is the pause before a retry.
	s3RetryWait = 200 * time.Millisecond
	// maxErrorBody bounds how much of an error response is read.
	maxErrorBody = 64 << 10
	// maxListBody bounds a listing page (1000 keys are about 300 KiB).
	maxListBody = 16 << 20
	// deleteBatch is S3's limit of keys per multi-object delete.
	deleteBatch = 1000
	// defaultRegion signs requests when Options.Region is empty, until a
	// server names the bucket's region.
	defaultRegion = "us-east-1"
)

// s3 talks to one bucket of one S3 server. It is safe for concurrent use.
type s3 struct {
	hc        *http.Client
	scheme    string // "http" or "https"
	endpoint  string // host[:port]
	bucket    string
	pathStyle bool
	creds     credentials
	region    atomic.Pointer[string]
	attempts  int
	retryWait time.Duration
	now       func() time.Time
}

// newS3 returns an s3 for the normalized options o with credentials cr;
// transport nil means the default (http.DefaultTransport's settings, no
// compression, o.CAFile trusted).
func newS3(o Options, cr credentials, transport http.RoundTripper) (*s3, error) {
	if transport == nil {
		t, err := defaultTransport(o)
		if err != nil {
			return nil, err
		}
		transport = t
	}
	s := &s3{
		hc: &http.Client{
			Transport: transport,
			// S3 redirects (301 PermanentRedirect, 307) come with an
			// error body naming the region; report them, do not follow.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		scheme:    "http",
		endpoint:  o.Endpoint,
		bucket:    o.Bucket,
		pathStyle: usePathStyle(o),
		creds:     cr,
		attempts:  s3Attempts,
		retryWait: s3RetryWait,
		now:       time.Now,
	}
	if o.Secure {
		s.scheme = "https"
	}
	region := o.Region
	if region == "" {
		region = defaultRegion
	}
	s.region.Store(&region)
	return s, nil
}

func defaultTransport(o Options) (*http.Transport, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Objects are compressed already, and a transparently decompressed
	// body would hide the bytes on the wire.
	t.DisableCompression = true
	t.ResponseHeaderTimeout = time.Minute
	t.MaxIdleConnsPerHost = 16
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		cfg, err := tlsWithCA(o.CAFile)
		if err != nil {
			return nil, err
		}
		t.TLSClientConfig = cfg
	}
	return t, nil
}

// usePathStyle reports whether buckets are addressed in the path: always
// with Options.PathStyle; otherwise for every endpoint but AWS's own
// (amazonaws.com), which uses virtual hosts (bucket.host), and on AWS too
// when a dotted bucket name would not match the TLS wildcard certificate.
func usePathStyle(o Options) bool {
	if o.PathStyle {
		return true
	}
	host := o.Endpoint
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	aws := strings.HasSuffix(host, ".amazonaws.com") || strings.HasSuffix(host, ".amazonaws.com.cn")
	return !aws || (o.Secure && strings.Contains(o.Bucket, "."))
}

func (s *s3) currentRegion() string { return *s.region.Load() }

// setRegion makes later requests sign for region.
func (s *s3) setRegion(region string) { s.region.Store(&region) }

// s3Error is an S3 error response, or one made up from the status of a
// response without a body (HEAD).
type s3Error struct {
	StatusCode int
	// Code is S3's error code ("NoSuchKey", "SignatureDoesNotMatch", …).
	Code      string
	Message   string
	Resource  string
	RequestID string
	// Region is the bucket's region when the server names it (the
	// x-amz-bucket-region header or a <Region> element), else "".
	Region string
}

func (e *s3Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Code)
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	b.WriteString(" (HTTP ")
	b.WriteString(strconv.Itoa(e.StatusCode))
	if e.RequestID != "" {
		b.WriteString(", request ")
		b.WriteString(e.RequestID)
	}
	b.WriteString(")")
	return b.String()
}

// objectInfo is what a HEAD or GET tells of an object.
type objectInfo struct {
	// Size is the stored (framed) object's length in bytes.
	Size int64
	// UserMetadata holds the x-amz-meta-* headers without the prefix, in
	// Go's canonical header case ("Eddy-Format"); read with metaGet.
	UserMetadata map[string]string
}

// s3Request is one S3 request; do sends it.
type s3Request struct {
	method string
	key    string // "" for the bucket
	query  url.Values
	header http.Header
	// body is sent whole (nil: none); its SHA-256 is signed.
	body []byte
	// wrap, when set, wraps the body reader of every attempt (bandwidth
	// limit, byte counting).
	wrap func(io.Reader) io.Reader
}

// do sends r, trying again (up to s.attempts in all) when the connection
// fails or the server answers 5xx or 429, and returns the response of a 2xx
// status; the caller closes its body. Any other status is an *s3Error. ctx
// bounds every attempt and the pause between them.
func (s *s3) do(ctx context.Context, r s3Request) (*http.Response, error) {
	payload := emptySHA256
	if r.body != nil {
		sum := sha256.Sum256(r.body)
		payload = hex.EncodeToString(sum[:])
	}
	var err error
	for attempt := 0; attempt < s.attempts; attempt++ {
		if attempt > 0 {
			if werr := sleepCtx(ctx, s.retryWait); werr != nil {
				return nil, errors.Join(err, werr)
			}
		}
		var req *http.Request
		if req, err = s.newRequest(ctx, r, payload); err != nil {
			return nil, err
		}
		resp, derr := s.hc.Do(req)
		if derr != nil {
			err = derr
			if cerr := ctx.Err(); cerr != nil {
				if !errors.Is(err, cerr) {
					err = fmt.Errorf("%w: %w", cerr, err)
				}
				return nil, err
			}
			continue
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		}
		err = responseError(resp, r.key)
		if !retryableStatus(resp.StatusCode) {
			return nil, err
		}
	}
	return nil, err
}

func retryableStatus(code int) bool {
	return code >= 500 || code == http.StatusTooManyRequests
}

// newRequest builds and signs one attempt of r.
func (s *s3) newRequest(ctx context.Context, r s3Request, payloadSHA256 string) (*http.Request, error) {
	var body io.Reader = http.NoBody
	if len(r.body) > 0 {
		body = bytes.NewReader(r.body)
		if r.wrap != nil {
			body = r.wrap(body)
		}
	}
	req, err := http.NewRequestWithContext(ctx, r.method, s.url(r.key, r.query).String(), body)
	if err != nil {
		return nil, fmt.Errorf("upload: request: %w", err)
	}
	req.ContentLength = int64(len(r.body))
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	signV4(req, s.creds, s.currentRegion(), payloadSHA256, s.now())
	return req, nil
}

// url returns the URL of key ("" for the bucket) with query, its path and
// query already in SigV4's canonical encoding.
func (s *s3) url(key string, query url.Values) *url.URL {
	u := &url.URL{Scheme: s.scheme, Host: s.endpoint, Path: "/" + key}
	if s.pathStyle {
		u.Path = "/" + s.bucket + "/" + key
	} else {
		u.Host = s.bucket + "." + s.endpoint
	}
	u.RawPath = uriEncode(u.Path, false)
	if len(query) > 0 {
		u.RawQuery = canonicalQuery(query.Encode())
	}
	return u
}

// responseError reads and closes the body of a non-2xx response and returns
// the *s3Error it describes. Without an XML error body (HEAD, a proxy's
// page) the code follows from the status: 404 is NoSuchKey for an object
// and NoSuchBucket for the bucket, 403 AccessDenied.
func responseError(resp *http.Response, key string) error {
	defer resp.Body.Close()
	e := &s3Error{
		StatusCode: resp.StatusCode,
		RequestID:  resp.Header.Get("X-Amz-Request-Id"),
		Region:     resp.Header.Get("X-Amz-Bucket-Region"),
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var x struct {
		Code, Message, Resource, RequestID, Region string
	}
	if len(data) > 0 && xml.Unmarshal(data, &x) == nil && x.Code != "" {
		e.Code, e.Message, e.Resource = x.Code, x.Message, x.Resource
		if x.RequestID != "" {
			e.RequestID = x.RequestID
		}
		if x.Region != "" {
			e.Region = x.Region
		}
		return e
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		e.Code = "NoSuchKey"
		if key == "" {
			e.Code = "NoSuchBucket"
		}
	case http.StatusForbidden:
		e.Code = "AccessDenied"
	case http.StatusMovedPermanently:
		e.Code = "PermanentRedirect"
	default:
		e.Code = strings.ReplaceAll(http.StatusText(resp.StatusCode), " ", "")
		if e.Code == "" {
			e.Code = "HTTP" + strconv.Itoa(resp.StatusCode)
		}
	}
	if msg := strings.TrimSpace(string(data)); msg != "" {
		e.Message = msg[:min(len(msg), 200)]
	}
	return e
}

// listPage lists up to maxKeys (0: the server's default, 1000) keys below
// prefix, from the continuation token (""; the start), with ListObjectsV2.
// It returns the keys and the token of the next page, "" after the last.
func (s *s3) listPage(ctx context.Context, prefix, token string, maxKeys int) ([]string, string, error) {
	q := url.Values{"list-type": {"2"}, "prefix": {prefix}}
	if token != "" {
		q.Set("continuation-token", token)
	}
	if maxKeys > 0 {
		q.Set("max-keys", strconv.Itoa(maxKeys))
	}
	resp, err := s.do(ctx, s3Request{method: http.MethodGet, query: q})
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var res struct {
		IsTruncated           bool
		NextContinuationToken string
		Contents              []struct{ Key string }
	}
	if err := xml.NewDecoder(io.LimitReader(resp.Body, maxListBody)).Decode(&res); err != nil {
		return nil, "", fmt.Errorf("upload: list response: %w", err)
	}
	keys := make([]string, len(res.Contents))
	for i, c := range res.Contents {
		keys[i] = c.Key
	}
	if !res.IsTruncated {
		return keys, "", nil
	}
	if res.NextContinuationToken == "" {
		return nil, "", errors.New("upload: list response is truncated but has no continuation token")
	}
	return keys, res.NextContinuationToken, nil
}

// list calls fn with every key below prefix, in the server's (lexical)
// order, page by page.
func (s *s3) list(ctx context.Context, prefix string, fn func(key string)) error {
	token := ""
	for {
		keys, next, err := s.listPage(ctx, prefix, token, 0)
		if err != nil {
			return err
		}
		for _, k := range keys {
			fn(k)
		}
		if next == "" {
			return nil
		}
		token = next
	}
}

// makeBucket creates the bucket in region (a LocationConstraint unless
// us-east-1, which S3 wants without one).
func (s *s3) makeBucket(ctx context.Context, region string) error {
	r := s3Request{method: http.MethodPut}
	if region != "" && region != defaultRegion {
		var b bytes.Buffer
		b.WriteString(`<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>`)
		xml.EscapeText(&b, []byte(region))
		b.WriteString(`</LocationConstraint></CreateBucketConfiguration>`)
		r.body = b.Bytes()
		r.header = http.Header{"Content-Type": {"application/xml"}}
	}
	resp, err := s.do(ctx, r)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// putObject stores body as key with user metadata meta (sent as
// x-amz-meta-<name> headers). wrap (may be nil) wraps the body of every
// attempt.
func (s *s3) putObject(ctx context.Context, key string, body []byte, meta map[string]string, wrap func(io.Reader) io.Reader) error {
	h := make(http.Header, len(meta)+1)
	h.Set("Content-Type", "application/octet-stream")
	for k, v := range meta {
		h.Set("X-Amz-Meta-"+k, v)
	}
	if body == nil {
		body = []byte{}
	}
	resp, err := s.do(ctx, s3Request{method: http.MethodPut, key: key, header: h, body: body, wrap: wrap})
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	return nil
}

// headObject returns key's size and metadata.
func (s *s3) headObject(ctx context.Context, key string) (objectInfo, error) {
	resp, err := s.do(ctx, s3Request{method: http.MethodHead, key: key})
	if err != nil {
		return objectInfo{}, err
	}
	resp.Body.Close()
	return infoOf(resp), nil
}

// getObject starts reading key and returns its body, which the caller
// closes, and its size and metadata.
func (s *s3) getObject(ctx context.Context, key string) (io.ReadCloser, objectInfo, error) {
	resp, err := s.do(ctx, s3Request{method: http.MethodGet, key: key})
	if err != nil {
		return nil, objectInfo{}, err
	}
	return resp.Body, infoOf(resp), nil
}

func infoOf(resp *http.Response) objectInfo {
	const prefix = "X-Amz-Meta-"
	info := objectInfo{Size: resp.ContentLength, UserMetadata: map[string]string{}}
	for k, vs := range resp.Header {
		if len(vs) > 0 && len(k) > len(prefix) && strings.EqualFold(k[:len(prefix)], prefix) {
			info.UserMetadata[k[len(prefix):]] = vs[0]
		}
	}
	return info
}

// keyError is the failure of one key of a multi-object delete.
type keyError struct {
	Key string
	Err *s3Error
}

// deleteObjects deletes keys with multi-object deletes of up to 1000 keys
// each, in quiet mode. It returns the keys the server reported failed (a
// missing key is not a failure in S3), or the error of a whole request.
func (s *s3) deleteObjects(ctx context.Context, keys []string) ([]keyError, error) {
	var failed []keyError
	for len(keys) > 0 {
		n := min(len(keys), deleteBatch)
		f, err := s.deleteBatch(ctx, keys[:n])
		if err != nil {
			return failed, err
		}
		failed = append(failed, f...)
		keys = keys[n:]
	}
	return failed, nil
}

func (s *s3) deleteBatch(ctx context.Context, keys []string) ([]keyError, error) {
	var b bytes.Buffer
	b.WriteString(`<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>true</Quiet>`)
	for _, k := range keys {
		b.WriteString("<Object><Key>")
		xml.EscapeText(&b, []byte(k))
		b.WriteString("</Key></Object>")
	}
	b.WriteString("</Delete>")
	// S3 requires an integrity header on this request; Content-MD5 is the
	// one every S3-compatible server accepts.
	sum := md5.Sum(b.Bytes())
	h := http.Header{
		"Content-Type": {"application/xml"},
		"Content-Md5":  {base64.StdEncoding.EncodeToString(sum[:])},
	}
	resp, err := s.do(ctx, s3Request{method: http.MethodPost, query: url.Values{"delete": {""}}, header: h, body: b.Bytes()})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var res struct {
		Errors []struct{ Key, Code, Message string } `xml:"Error"`
	}
	if err := xml.NewDecoder(io.LimitReader(resp.Body, maxListBody)).Decode(&res); err != nil && err != io.EOF {
		return nil, fmt.Errorf("upload: delete response: %w", err)
	}
	var failed []keyError
	for _, e := range res.Errors {
		failed = append(failed, keyError{Key: e.Key, Err: &s3Error{StatusCode: resp.StatusCode, Code: e.Code, Message: e.Message}})
	}
	return failed, nil
}
