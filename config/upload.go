package config

import (
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"strings"

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
	DeclRange     hcl.Range
}

var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

func (d *decoder) decodeUpload(b *hcl.Block) *Upload {
	if b.Labels[0] != "s3" {
		d.errorf(b.LabelRanges[0], "Unknown upload type", "There is no upload type %q; use \"s3\" (also for MinIO and other S3-compatible servers).%s",
			b.Labels[0], didYouMean(b.Labels[0], []string{"s3"}))
		return nil
	}
	a, _ := d.content(b, []string{"endpoint", "bucket", "prefix", "region", "access_key", "secret_key", "secure", "ca_file",
		"path_style", "max_bandwidth", "concurrency", "create_bucket", "encryption_key"})
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

// isKey32 reports whether s is 32 bytes in hex or base64.
func isKey32(s string) bool {
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		return true
	}
	b, err := base64.StdEncoding.DecodeString(s)
	return err == nil && len(b) == 32
}
