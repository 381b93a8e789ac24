package upload

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/eddy-edge/eddy/state/vfs"
)

// Options configure a Client. The zero value of every field but Endpoint and
// Bucket is usable.
type Options struct {
	// Endpoint is the S3 server as host[:port] ("minio.local:9000",
	// "s3.amazonaws.com"), or a URL whose scheme sets Secure
	// ("https://minio.local:9000").
	Endpoint string
	// Bucket holds every object. It must exist unless CreateBucket is set.
	Bucket string
	// Prefix is prepended to every object key; a "/" is appended when it is
	// missing. Conventionally "${device_id}/" so one bucket serves a fleet.
	// Empty: the bucket root.
	Prefix string
	// Region is the bucket's region, used to sign requests and to create
	// the bucket. Empty: minio-go asks the server for the bucket's
	// location once and signs for it.
	Region string
	// AccessKey, SecretKey and SessionToken are static credentials. When
	// AccessKey is empty, Credentials or else minio-go's standard chain
	// applies (environment, credential files, IAM); see standardChain.
	AccessKey, SecretKey, SessionToken string
	// Credentials, when set and AccessKey is empty, is the source of
	// credentials instead of the standard chain: NewAWSIoTProvider,
	// NewMinIOCertificateProvider, or any minio-go provider. Credentials
	// that expire are fetched again before they do (credentialKeeper).
	Credentials credentials.Provider
	// Secure selects HTTPS.
	Secure bool
	// CAFile is a PEM file of CA certificates trusted in addition to the
	// system's, for a server with a private CA. Only with Secure.
	CAFile string
	// PathStyle addresses buckets as https://host/bucket/key instead of
	// https://bucket.host/key; most self-hosted servers need it. Off:
	// minio-go chooses from the endpoint: virtual hosts for AWS and Google
	// (unless a dotted bucket name over HTTPS would break the wildcard
	// certificate), path style for everything else.
	PathStyle bool
	// MaxBandwidth caps the bytes per second of all transfers of the Client
	// together, uploads and downloads counted separately. 0: unlimited.
	MaxBandwidth int64
	// Concurrency is how many files a Shipper uploads at once. 0: 2. Each
	// transfer holds up to ~2 chunks (16 MiB) of buffers.
	Concurrency int
	// CreateBucket creates the bucket on first use when it is missing.
	// Off: a missing bucket is the error ErrNoBucket.
	CreateBucket bool
	// EncryptionKey, when set, must be 32 bytes: everything uploaded is
	// encrypted on the device with AES-256-GCM (see frame.go), and every
	// object read must be encrypted with the same key (ErrWrongKey
	// otherwise; an unencrypted object is refused as ErrCorrupt). Empty:
	// no client-side encryption. Losing the key loses the checkpoints.
	EncryptionKey []byte
	// Progress, when set, is called during PutFile and GetFile with the
	// plaintext bytes done so far: at the start, after every chunk (8 MiB)
	// and at the end. It must be fast and must not call back into the
	// Client; it may be called from several goroutines at once.
	Progress func(Progress)
	// FS is the file system of the local files: PutFile reads them,
	// GetFile writes them (and makes them durable, see GetFile). Nil:
	// vfs.Default, the operating system's.
	FS vfs.FS
	// Transport replaces the HTTP transport (tests count requests with
	// it); CAFile is then ignored. Nil: minio-go's default transport
	// (proxy from the environment, dial and TLS timeouts) without
	// compression, a 1-minute response-header timeout, and CAFile applied.
	Transport http.RoundTripper
}

// Progress reports a transfer's advance.
type Progress struct {
	// Op is "upload" or "download".
	Op string
	// Name is the file's name (below files/).
	Name string
	// Done and Total are plaintext bytes. Done == Total marks the end.
	Done, Total int64
}

const defaultConcurrency = 2

// normalize validates o and returns it with defaults applied, the endpoint
// without scheme, and Secure set from the scheme.
func (o Options) normalize() (Options, error) {
	switch {
	case strings.HasPrefix(o.Endpoint, "https://"):
		o.Endpoint, o.Secure = strings.TrimPrefix(o.Endpoint, "https://"), true
	case strings.HasPrefix(o.Endpoint, "http://"):
		o.Endpoint, o.Secure = strings.TrimPrefix(o.Endpoint, "http://"), false
	}
	o.Endpoint = strings.TrimSuffix(o.Endpoint, "/")
	var errs []error
	if o.Endpoint == "" {
		errs = append(errs, errors.New("endpoint is empty"))
	} else if strings.Contains(o.Endpoint, "/") {
		errs = append(errs, fmt.Errorf("endpoint %q has a path; give host[:port]", o.Endpoint))
	}
	if o.Bucket == "" {
		errs = append(errs, errors.New("bucket is empty"))
	}
	if strings.HasPrefix(o.Prefix, "/") {
		errs = append(errs, fmt.Errorf("prefix %q starts with /", o.Prefix))
	}
	if o.Prefix != "" && !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	if o.MaxBandwidth < 0 {
		errs = append(errs, fmt.Errorf("max bandwidth %d is negative", o.MaxBandwidth))
	}
	if o.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("concurrency %d is negative", o.Concurrency))
	}
	if o.Concurrency == 0 {
		o.Concurrency = defaultConcurrency
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if n := len(o.EncryptionKey); n != 0 && n != 32 {
		errs = append(errs, fmt.Errorf("encryption key is %d bytes, want 32 (AES-256)", n))
	}
	if o.CAFile != "" && !o.Secure {
		errs = append(errs, errors.New("ca_file is set but the endpoint is not secure (https)"))
	}
	if (o.AccessKey == "") != (o.SecretKey == "") {
		errs = append(errs, errors.New("give both access key and secret key, or neither for the standard credential chain"))
	}
	if len(errs) > 0 {
		return o, fmt.Errorf("upload: options: %w", errors.Join(errs...))
	}
	return o, nil
}

// tlsWithCA returns a TLS config trusting the system roots and the PEM
// certificates of caFile.
func tlsWithCA(caFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("upload: ca file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("upload: ca file %s: no PEM certificate found", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
