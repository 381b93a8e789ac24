package offsite

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"

	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/state/vfs"
	"github.com/eddy-edge/eddy/upload"
)

// Target is where uploaded checkpoints live and how to reach them, as
// plain values. The caller resolves the prefix: only it knows the device
// id that data_dir settles.
type Target struct {
	// Upload is the configuration's upload block; nil makes NewClient
	// fail with an error that asks for one.
	Upload *config.Upload
	// DeviceID is the configuration's agent.device_id, which
	// ${device_id} in the credentials block's thing_name expands to.
	DeviceID string
	// Bucket overrides Upload.Bucket when set (restore --from s3://…).
	Bucket string
	// Prefix is the objects' key prefix, ${device_id} already expanded.
	Prefix string
}

// NewClient builds the S3 client of t. It reads nothing in data_dir and
// sends no request, so validate can build it too. fsys is the file system
// of the local files it uploads and downloads; log may be nil, and so may
// progress, which is told of each transfer's bytes.
func NewClient(t Target, fsys vfs.FS, log *slog.Logger, progress func(upload.Progress)) (*upload.Client, error) {
	u := t.Upload
	if u == nil {
		return nil, errors.New("agent: the configuration has no upload block: add upload \"s3\" { endpoint, bucket, … }")
	}
	key, err := encryptionKey(u.EncryptionKey)
	if err != nil {
		return nil, err
	}
	bucket := t.Bucket
	if bucket == "" {
		bucket = u.Bucket
	}
	creds, err := credentialProvider(u, t.DeviceID)
	if err != nil {
		return nil, err
	}
	return upload.New(upload.Options{Endpoint: u.Endpoint, Bucket: bucket, Prefix: t.Prefix, Region: u.Region,
		AccessKey: u.AccessKey, SecretKey: u.SecretKey, Credentials: creds, Secure: u.Secure, CAFile: u.CAFile, PathStyle: u.PathStyle,
		MaxBandwidth: u.MaxBandwidthBytes, Concurrency: u.Concurrency, CreateBucket: u.CreateBucket,
		EncryptionKey: key, Progress: progress, FS: fsys}, log)
}

// credentialProvider returns the provider of upload block u's credentials
// block, or nil for minio-go's standard chain.
func credentialProvider(u *config.Upload, deviceID string) (credentials.Provider, error) {
	c := u.Credentials
	if c == nil {
		return nil, nil
	}
	files := upload.CertificateFiles{CertFile: c.CertFile, KeyFile: c.KeyFile, CAFile: c.CAFile}
	switch c.Provider {
	case config.CredentialsAWSIoT:
		return upload.NewAWSIoTProvider(upload.AWSIoTOptions{Endpoint: c.Endpoint, RoleAlias: c.RoleAlias,
			ThingName: config.Expand(c.ThingName, map[string]string{"device_id": deviceID}), CertificateFiles: files})
	case config.CredentialsMinIOSTSCertificate:
		endpoint := c.Endpoint
		if endpoint == "" {
			endpoint = "https://" + u.Endpoint
		}
		return upload.NewMinIOCertificateProvider(upload.MinIOCertificateOptions{Endpoint: endpoint, Duration: c.Duration, CertificateFiles: files})
	}
	return nil, nil
}

// encryptionKey decodes upload.encryption_key: 32 bytes as 64 hex digits or
// as base64 (typically from env() or file()).
func encryptionKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	return nil, errors.New("agent: upload encryption_key must be 32 bytes, written as 64 hex digits or base64 (e.g. openssl rand -hex 32)")
}
