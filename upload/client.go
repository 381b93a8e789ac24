package upload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/eddy-edge/eddy/state/vfs"
)

// Object key layout below Options.Prefix.
const (
	filesDir     = "files/"
	manifestsDir = "manifests/"
)

// Object metadata (S3 user metadata, "x-amz-meta-eddy-*"). The frame header
// is authoritative for reading; metadata lets PutFile decide without a
// download whether an object is already there in the current form.
const (
	metaFormat      = "Eddy-Format"      // frame version, "1"
	metaLayout      = "Eddy-Layout"      // "single" or "chunked"
	metaSize        = "Eddy-Size"        // plaintext bytes
	metaSHA256      = "Eddy-Sha256"      // plaintext SHA-256, hex
	metaCompression = "Eddy-Compression" // "zstd"
	metaEncryption  = "Eddy-Encryption"  // "none" or "aes-256-gcm"
	metaKeyID       = "Eddy-Key-Id"      // key id (frame.go), hex; absent without encryption

	layoutSingle  = "single"
	layoutChunked = "chunked"
)

// Client reads and writes checkpoint files and manifests in one bucket and
// prefix. It is safe for concurrent use. New does no network I/O; the first
// operation checks the bucket (creating it when Options.CreateBucket is set)
// and returns ErrNoBucket, ErrCredentials or ErrAccessDenied clearly when
// that fails, then retries the check on the next operation.
type Client struct {
	s3       *s3
	keeper   *credentialKeeper // nil with static keys
	log      *slog.Logger
	opts     Options
	bucket   string
	prefix   string
	endpoint string
	codec    *codec
	fs       vfs.FS
	up, down *limiter

	// chunkSize and largeFile are the chunked layout's parameters
	// (chunked.go); tests shrink them.
	chunkSize, largeFile int64

	readyMu sync.Mutex
	ready   bool

	bytesUp, bytesDown         atomic.Int64
	objectsPut, objectsSkipped atomic.Int64
	objectsGot                 atomic.Int64
	outBufs                    sync.Pool // *bytes.Buffer for framed objects
	chunkBufs                  sync.Pool // *[]byte of chunkSize, for chunked uploads
}

// ClientStats are a Client's cumulative counters.
type ClientStats struct {
	// BytesUploaded and BytesDownloaded count object bytes on the wire
	// (compressed and framed), including retried requests.
	BytesUploaded, BytesDownloaded int64
	// ObjectsUploaded counts objects written (files, chunks, chunk indexes,
	// manifests); ObjectsSkipped counts files and chunks PutFile found
	// already present.
	ObjectsUploaded, ObjectsSkipped int64
	// ObjectsDownloaded counts objects read.
	ObjectsDownloaded int64
}

// New returns a Client for opts. It validates opts and sets up the HTTP
// client; it does not contact the server. log receives transfer summaries at
// debug level; nil discards them.
func New(opts Options, log *slog.Logger) (*Client, error) {
	opts, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cd, err := newCodec(opts.EncryptionKey)
	if err != nil {
		return nil, err
	}
	var creds *credentials.Credentials
	var keeper *credentialKeeper
	if opts.AccessKey != "" {
		creds = credentials.NewStaticV4(opts.AccessKey, opts.SecretKey, opts.SessionToken)
	} else {
		src := opts.Credentials
		if src == nil {
			src = standardChain()
		}
		// The client of the chain's requests (IAM, web identity STS);
		// the X.509 providers bring their own.
		keeper = newCredentialKeeper(src, &http.Client{Timeout: 30 * time.Second}, log)
		creds = credentials.New(keeper)
	}
	s, err := newS3(opts, creds)
	if err != nil {
		return nil, err
	}
	c := &Client{
		s3:        s,
		keeper:    keeper,
		log:       log,
		opts:      opts,
		bucket:    opts.Bucket,
		prefix:    opts.Prefix,
		endpoint:  opts.Endpoint,
		codec:     cd,
		fs:        opts.FS,
		up:        newLimiter(opts.MaxBandwidth),
		down:      newLimiter(opts.MaxBandwidth),
		chunkSize: ChunkSize,
		largeFile: LargeFileSize,
	}
	return c, nil
}

// Close stops the Client's background fetching of credentials, if any. The
// Client must not be used afterwards.
func (c *Client) Close() {
	if c.keeper != nil {
		c.keeper.close()
	}
}

// Stats returns the Client's counters.
func (c *Client) Stats() ClientStats {
	return ClientStats{
		BytesUploaded:     c.bytesUp.Load(),
		BytesDownloaded:   c.bytesDown.Load(),
		ObjectsUploaded:   c.objectsPut.Load(),
		ObjectsSkipped:    c.objectsSkipped.Load(),
		ObjectsDownloaded: c.objectsGot.Load(),
	}
}

// Check waits for valid credentials (see credentialKeeper), then verifies
// that the bucket is reachable with them, creating it when
// Options.CreateBucket is set. Every operation does this once before
// its first request; the agent may call Check at start to report a bad
// configuration early.
func (c *Client) Check(ctx context.Context) error {
	if c.keeper != nil {
		if err := c.keeper.wait(ctx); err != nil {
			return fmt.Errorf("upload: waiting for S3 credentials: %w", err)
		}
	}
	c.readyMu.Lock()
	defer c.readyMu.Unlock()
	if c.ready {
		return nil
	}
	if err := c.s3.probe(ctx, c.prefix); err != nil {
		err = c.classify("check bucket", "", err)
		if !(c.opts.CreateBucket && isNoBucket(err)) {
			return err
		}
		if err := c.s3.makeBucket(ctx); err != nil {
			var se *s3Error
			if !errors.As(err, &se) || (se.resp.Code != "BucketAlreadyOwnedByYou" && se.resp.Code != "BucketAlreadyExists") {
				return c.classify("create bucket", "", err)
			}
		}
		c.log.Info("upload: created bucket", "bucket", c.bucket, "endpoint", c.endpoint)
	}
	c.ready = true
	return nil
}

func isNoBucket(err error) bool { return errors.Is(err, ErrNoBucket) }

// key returns the object key of name below dir.
func (c *Client) key(dir, name string) string { return c.prefix + dir + name }

// partSuffix matches the chunk objects of the chunked layout.
var partSuffix = regexp.MustCompile(`\.part-[0-9]+$`)

// validateName checks a file or manifest name: a relative slash-separated
// path, clean, that cannot be mistaken for a chunk object.
func validateName(kind, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("upload: %s name is empty", kind)
	case strings.HasPrefix(name, "/") || path.Clean(name) != name || strings.HasPrefix(name, "../") || name == "..":
		return fmt.Errorf("upload: %s name %q is not a clean relative path", kind, name)
	case partSuffix.MatchString(name):
		return fmt.Errorf("upload: %s name %q ends like a chunk object (.part-N)", kind, name)
	}
	return nil
}

// metadata returns the user metadata of an object of layout with plaintext
// size and sum.
func (c *Client) metadata(layout string, size int64, sum string) map[string]string {
	m := map[string]string{
		metaFormat:      strconv.Itoa(frameVersion),
		metaLayout:      layout,
		metaSize:        strconv.FormatInt(size, 10),
		metaSHA256:      sum,
		metaCompression: "zstd",
		metaEncryption:  c.codec.encryption(),
	}
	if id := c.codec.keyIDHex(); id != "" {
		m[metaKeyID] = id
	}
	return m
}

// metaGet reads user metadata case-insensitively: servers differ in how they
// return the keys.
func metaGet(m map[string]string, key string) string {
	if v, ok := m[key]; ok {
		return v
	}
	for k, v := range m {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return ""
}

// sameForm reports whether an existing object's metadata says it holds a
// plaintext of size bytes (and, when sum is not "", that SHA-256) in the form
// this Client writes: same layout version and encryption key.
func (c *Client) sameForm(m map[string]string, size int64, sum string) bool {
	return metaGet(m, metaFormat) == strconv.Itoa(frameVersion) &&
		metaGet(m, metaSize) == strconv.FormatInt(size, 10) &&
		(sum == "" || metaGet(m, metaSHA256) == sum) &&
		metaGet(m, metaEncryption) == c.codec.encryption() &&
		metaGet(m, metaKeyID) == c.codec.keyIDHex()
}

func (c *Client) progress(op, name string, done, total int64) {
	if c.opts.Progress != nil {
		c.opts.Progress(Progress{Op: op, Name: name, Done: done, Total: total})
	}
}
