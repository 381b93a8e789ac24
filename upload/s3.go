package upload

// The S3 side of the package: minio-go's Client makes the requests (SigV4
// signing, retries with backoff, the bucket's region, path or virtual-host
// addressing, multipart for large bodies). This file adapts its API to what
// the package needs: bodies paced by the bandwidth limit, user metadata,
// and errors that keep S3's code.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// s3 talks to one bucket of one S3 server. It is safe for concurrent use.
type s3 struct {
	mc     *minio.Client
	core   minio.Core // GetObject with the response's metadata in one request
	bucket string
	region string
}

// newS3 returns an s3 for the normalized options o, signing with creds.
func newS3(o Options, creds *credentials.Credentials) (*s3, error) {
	transport := o.Transport
	if transport == nil {
		t, err := defaultTransport(o)
		if err != nil {
			return nil, err
		}
		transport = t
	}
	lookup := minio.BucketLookupAuto // virtual hosts where the endpoint supports them (AWS, GCS)
	if o.PathStyle {
		lookup = minio.BucketLookupPath
	}
	mc, err := minio.New(o.Endpoint, &minio.Options{
		Creds:        creds,
		Secure:       o.Secure,
		Transport:    transport,
		Region:       o.Region,
		BucketLookup: lookup,
	})
	if err != nil {
		return nil, fmt.Errorf("upload: S3 client: %w", err)
	}
	return &s3{mc: mc, core: minio.Core{Client: mc}, bucket: o.Bucket, region: o.Region}, nil
}

func defaultTransport(o Options) (http.RoundTripper, error) {
	t, err := minio.DefaultTransport(o.Secure)
	if err != nil {
		return nil, fmt.Errorf("upload: transport: %w", err)
	}
	// Objects are compressed already, and a transparently decompressed
	// body would hide the bytes on the wire.
	t.DisableCompression = true
	t.ResponseHeaderTimeout = time.Minute
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

// s3Error is an S3 error response as minio-go reports it, with S3's code in
// its text (minio-go's own text is only the message).
type s3Error struct{ resp minio.ErrorResponse }

func (e *s3Error) Error() string {
	var b strings.Builder
	b.WriteString(e.resp.Code)
	if e.resp.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.resp.Message)
	}
	b.WriteString(" (HTTP ")
	b.WriteString(strconv.Itoa(e.resp.StatusCode))
	if e.resp.RequestID != "" {
		b.WriteString(", request ")
		b.WriteString(e.resp.RequestID)
	}
	b.WriteString(")")
	return b.String()
}

func (e *s3Error) Unwrap() error { return e.resp }

// asS3Error returns err with an S3 error response in it made an *s3Error,
// and other errors unchanged.
func asS3Error(err error) error {
	var resp minio.ErrorResponse
	if err == nil || !errors.As(err, &resp) || resp.Code == "" {
		return err
	}
	return &s3Error{resp: resp}
}

// objectInfo is what a HEAD or GET tells of an object.
type objectInfo struct {
	// Size is the stored (framed) object's length in bytes.
	Size int64
	// UserMetadata holds the x-amz-meta-* headers without the prefix;
	// read with metaGet.
	UserMetadata map[string]string
}

func infoOf(oi minio.ObjectInfo) objectInfo {
	m := make(map[string]string, len(oi.UserMetadata))
	for k, v := range oi.UserMetadata {
		m[k] = v
	}
	return objectInfo{Size: oi.Size, UserMetadata: m}
}

// probe lists at most one key below prefix: a GET, not a HEAD, so an error
// carries S3's code (a HEAD's has no body, and a wrong secret and a missing
// permission would both read as 403).
func (s *s3) probe(ctx context.Context, prefix string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for obj := range s.mc.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true, MaxKeys: 1}) {
		return asS3Error(obj.Err)
	}
	return nil
}

// list calls fn with every key below prefix, in the server's (lexical)
// order; minio-go pages through ListObjectsV2.
func (s *s3) list(ctx context.Context, prefix string, fn func(key string)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for obj := range s.mc.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return asS3Error(obj.Err)
		}
		fn(obj.Key)
	}
	return ctx.Err()
}

// makeBucket creates the bucket in the configured region (minio-go's
// default, us-east-1, when none is).
func (s *s3) makeBucket(ctx context.Context) error {
	return asS3Error(s.mc.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: s.region}))
}

// putObject stores body as key with user metadata meta. body is read once
// per attempt and must be seekable for minio-go to retry; its length is
// size.
func (s *s3) putObject(ctx context.Context, key string, body io.ReadSeeker, size int64, meta map[string]string) error {
	_, err := s.mc.PutObject(ctx, s.bucket, key, body, size, minio.PutObjectOptions{
		UserMetadata: meta,
		ContentType:  "application/octet-stream",
	})
	return asS3Error(err)
}

// headObject returns key's size and metadata.
func (s *s3) headObject(ctx context.Context, key string) (objectInfo, error) {
	oi, err := s.mc.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return objectInfo{}, asS3Error(err)
	}
	return infoOf(oi), nil
}

// getObject starts reading key and returns its body, which the caller
// closes, and its size and metadata.
func (s *s3) getObject(ctx context.Context, key string) (io.ReadCloser, objectInfo, error) {
	body, oi, _, err := s.core.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, objectInfo{}, asS3Error(err)
	}
	return body, infoOf(oi), nil
}

// keyError is the failure of one key of a multi-object delete.
type keyError struct {
	Key string
	Err error
}

// deleteObjects deletes keys with minio-go's multi-object deletes (1000
// keys a request). It returns the keys the server reported failed (a
// missing key is not a failure in S3), or the error of a whole request.
func (s *s3) deleteObjects(ctx context.Context, keys []string) ([]keyError, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan minio.ObjectInfo)
	go func() {
		defer close(ch)
		for _, k := range keys {
			select {
			case ch <- minio.ObjectInfo{Key: k}:
			case <-ctx.Done():
				return
			}
		}
	}()
	var failed []keyError
	for e := range s.mc.RemoveObjects(ctx, s.bucket, ch, minio.RemoveObjectsOptions{}) {
		if e.ObjectName == "" {
			return failed, asS3Error(e.Err)
		}
		failed = append(failed, keyError{Key: e.ObjectName, Err: asS3Error(e.Err)})
	}
	return failed, ctx.Err()
}
