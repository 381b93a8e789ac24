package config

import (
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Upload is the upload "s3" block: where checkpoints are shipped. Only the
// shape is checked here; the uploader dials it.
type Upload struct {
	// Type is "s3", the only one.
	Type string
	// Endpoint is host[:port], without scheme; required.
	Endpoint string
	// Bucket is required and a valid S3 bucket name.
	Bucket string
	// Prefix is a template with ${device_id}; default "${device_id}/".
	Prefix               string
	Region               string
	AccessKey, SecretKey string
	// Secure selects HTTPS; default true.
	Secure bool
	// CAFile verifies the endpoint's certificate; "" means the system pool.
	CAFile    string
	PathStyle bool
	// MaxBandwidthBytes caps upload bytes per second; 0 is unlimited.
	MaxBandwidthBytes int64
	// Concurrency is parallel uploads, default 2.
	Concurrency  int
	CreateBucket bool
	// EncryptionKey, when set, encrypts everything uploaded on the device
	// (AES-256-GCM, client side: the bucket never sees plaintext). 32
	// bytes written as 64 hex digits or base64, e.g. from env() or file().
	EncryptionKey string
	// Credentials is the credentials block: where credentials come from
	// when access_key is not set. Nil: minio-go's standard chain.
	Credentials *UploadCredentials
	DeclRange   hcl.Range
}

// Credential providers of the credentials block.
const (
	CredentialsDefault             = "default"
	CredentialsAWSIoT              = "aws_iot"
	CredentialsMinIOSTSCertificate = "minio_sts_certificate"
)

// UploadCredentials is upload's credentials block.
type UploadCredentials struct {
	// Provider is CredentialsDefault, CredentialsAWSIoT or
	// CredentialsMinIOSTSCertificate.
	Provider string
	// Endpoint is the credentials endpoint: for aws_iot host[:port], for
	// minio_sts_certificate an https:// URL (default: the S3 endpoint).
	Endpoint string
	// RoleAlias (aws_iot) names the role; ThingName (aws_iot) is a
	// template with ${device_id}, default "${device_id}".
	RoleAlias, ThingName string
	// CertFile, KeyFile: the device's client certificate; CAFile: CAs
	// trusted besides the system's.
	CertFile, KeyFile, CAFile string
	// Duration (minio_sts_certificate) is the lifetime asked for; 0: 1h.
	Duration  time.Duration
	DeclRange hcl.Range
}

var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

func (d *decoder) decodeUpload(b *hcl.Block) *Upload {
	if b.Labels[0] != "s3" {
		d.errorf(b.LabelRanges[0], "Unknown upload type", "There is no upload type %q; use \"s3\" (also for MinIO and other S3-compatible servers).%s",
			b.Labels[0], didYouMean(b.Labels[0], []string{"s3"}))
		return nil
	}
	a, content := d.content(b, []string{"endpoint", "bucket", "prefix", "region", "access_key", "secret_key", "secure", "ca_file",
		"path_style", "max_bandwidth", "concurrency", "create_bucket", "encryption_key"}, hcl.BlockHeaderSchema{Type: "credentials"})
	a.require("endpoint", "bucket")
	u := &Upload{
		Type:              "s3",
		Endpoint:          a.str("endpoint", noVars, ""),
		Bucket:            a.str("bucket", noVars, ""),
		Prefix:            a.str("prefix", deviceIDVars, "${device_id}/"),
		Region:            a.str("region", noVars, ""),
		AccessKey:         a.str("access_key", noVars, ""),
		SecretKey:         a.str("secret_key", noVars, ""),
		Secure:            a.boolean("secure", true),
		CAFile:            a.str("ca_file", noVars, ""),
		PathStyle:         a.boolean("path_style", false),
		MaxBandwidthBytes: a.size("max_bandwidth", 0),
		Concurrency:       int(a.integer("concurrency", 2, 1, 64)),
		CreateBucket:      a.boolean("create_bucket", false),
		EncryptionKey:     a.str("encryption_key", noVars, ""),
		DeclRange:         b.DefRange,
	}
	if cb := d.single(content.Blocks, "credentials"); cb != nil {
		u.Credentials = d.decodeUploadCredentials(cb)
		if u.Credentials != nil && u.AccessKey != "" {
			d.errorf(cb.DefRange, "Two credential sources", "Remove either access_key/secret_key or the credentials block: static keys take the place of any provider.")
		}
	}
	if u.Endpoint != "" && regexp.MustCompile(`^[a-z]+://`).MatchString(u.Endpoint) {
		d.errorf(a.rangeOf("endpoint"), "Invalid endpoint", "Write the endpoint as host:port without a scheme, e.g. \"minio.local:9000\"; secure = true selects HTTPS.")
	}
	if u.Bucket != "" && !bucketName.MatchString(u.Bucket) {
		d.errorf(a.rangeOf("bucket"), "Invalid bucket name", "%q is not an S3 bucket name: 3 to 63 lower-case letters, digits, \".\" and \"-\".", u.Bucket)
	}
	if (u.AccessKey == "") != (u.SecretKey == "") {
		d.errorf(b.DefRange, "Incomplete credentials", "Set both \"access_key\" and \"secret_key\", or neither to use the environment's credentials.")
	}
	if k := strings.TrimSpace(u.EncryptionKey); k != "" && !isKey32(k) {
		d.errorf(a.rangeOf("encryption_key"), "Invalid encryption key", "The key is 32 bytes written as 64 hex digits or base64; make one with: openssl rand -hex 32")
	}
	return u
}

func (d *decoder) decodeUploadCredentials(b *hcl.Block) *UploadCredentials {
	a, _ := d.content(b, []string{"provider", "endpoint", "role_alias", "thing_name", "cert_file", "key_file", "ca_file", "duration"})
	c := &UploadCredentials{
		Provider:  a.enum("provider", []string{CredentialsDefault, CredentialsAWSIoT, CredentialsMinIOSTSCertificate}, CredentialsDefault),
		Endpoint:  a.str("endpoint", noVars, ""),
		RoleAlias: a.str("role_alias", noVars, ""),
		ThingName: a.str("thing_name", deviceIDVars, "${device_id}"),
		CertFile:  a.str("cert_file", noVars, ""),
		KeyFile:   a.str("key_file", noVars, ""),
		CAFile:    a.str("ca_file", noVars, ""),
		Duration:  a.duration("duration", 0),
		DeclRange: b.DefRange,
	}
	only := func(provider string, names ...string) {
		for _, n := range names {
			if a.has(n) && c.Provider != provider {
				d.errorf(a.rangeOf(n), "Unused credentials setting", "%q applies only to provider = %q; remove it.", n, provider)
			}
		}
	}
	switch c.Provider {
	case CredentialsDefault:
		for _, n := range []string{"endpoint", "cert_file", "key_file", "ca_file"} {
			if a.has(n) {
				d.errorf(a.rangeOf(n), "Unused credentials setting", "%q is for provider = \"aws_iot\" or \"minio_sts_certificate\"; the default chain reads the environment, credential files and IAM.", n)
			}
		}
	case CredentialsAWSIoT:
		a.require("endpoint", "role_alias", "cert_file", "key_file")
		if regexp.MustCompile(`^[a-z]+://`).MatchString(c.Endpoint) {
			d.errorf(a.rangeOf("endpoint"), "Invalid endpoint", "Write the AWS IoT credentials endpoint as a host name without a scheme, e.g. \"c2abc.credentials.iot.eu-west-1.amazonaws.com\" (aws iot describe-endpoint --endpoint-type iot:CredentialProvider).")
		}
	case CredentialsMinIOSTSCertificate:
		a.require("cert_file", "key_file")
		if c.Endpoint != "" && !strings.HasPrefix(c.Endpoint, "https://") {
			d.errorf(a.rangeOf("endpoint"), "Invalid endpoint", "The STS endpoint is an https:// URL, e.g. \"https://minio.local:9000\": the client certificate is the proof of identity.")
		}
	}
	only(CredentialsAWSIoT, "role_alias", "thing_name")
	only(CredentialsMinIOSTSCertificate, "duration")
	return c
}

// isKey32 reports whether s is 32 bytes in hex or base64.
func isKey32(s string) bool {
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		return true
	}
	b, err := base64.StdEncoding.DecodeString(s)
	return err == nil && len(b) == 32
}
