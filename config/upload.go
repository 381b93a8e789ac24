package config

import (
	"regexp"

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
	// EncryptionKey enables SSE-C with this key when set.
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
	if u.EncryptionKey != "" && len(u.EncryptionKey) != 32 {
		d.errorf(a.rangeOf("encryption_key"), "Invalid encryption key", "An SSE-C key is exactly 32 bytes; got %d.", len(u.EncryptionKey))
	}
	return u
}
