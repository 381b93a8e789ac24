package upload

import (
	"errors"
	"net/http"
	"strings"
)

// Sentinel errors. Every error the package returns names the object or bucket
// it concerns and wraps one of these (when one applies) and the cause; test
// with errors.Is.
var (
	// ErrNotFound is returned when the object asked for does not exist.
	ErrNotFound = errors.New("upload: object not found")
	// ErrNoBucket is returned when the bucket does not exist and
	// Options.CreateBucket is off.
	ErrNoBucket = errors.New("upload: bucket does not exist")
	// ErrCredentials is returned when the server rejects the credentials: an
	// unknown access key or a wrong secret key.
	ErrCredentials = errors.New("upload: S3 rejected the credentials")
	// ErrAccessDenied is returned when the credentials are valid but lack a
	// permission for the bucket or object.
	ErrAccessDenied = errors.New("upload: S3 denied access")
	// ErrCorrupt is returned when a downloaded object fails verification:
	// bad framing, a failed decryption tag, a broken compressed stream or a
	// SHA-256 that differs from the expected one. The object was altered or
	// damaged after upload; it must not be used.
	ErrCorrupt = errors.New("upload: object is corrupt or was tampered with")
	// ErrWrongKey is returned when an object was encrypted with another key
	// than Options.EncryptionKey, or is encrypted and no key is configured.
	ErrWrongKey = errors.New("upload: object was encrypted with a different key")
	// ErrLocalMismatch is returned by uploads when a local file differs from
	// the SHA-256 or size it was announced with: a damaged local checkpoint,
	// which is never uploaded.
	ErrLocalMismatch = errors.New("upload: local file does not match its checksum")
)

// ObjectError is the error of an operation on one object or bucket. It
// matches its Kind (a sentinel above, or nil) and its cause with errors.Is
// and errors.As.
type ObjectError struct {
	// Op is the failed step: "put", "get", "stat", "list", "delete",
	// "check bucket", "create bucket", "read".
	Op string
	// Object is s3://bucket[/key].
	Object string
	// Endpoint is the S3 server, for errors the server or network caused.
	Endpoint string
	// Kind is the sentinel that applies, or nil.
	Kind error
	// Err is the cause.
	Err error
}

func (e *ObjectError) Error() string {
	var b strings.Builder
	b.WriteString("upload: ")
	b.WriteString(e.Op)
	b.WriteString(" ")
	b.WriteString(e.Object)
	if e.Endpoint != "" {
		b.WriteString(" at ")
		b.WriteString(e.Endpoint)
	}
	if e.Kind != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Kind.Error(), "upload: "))
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "upload: "))
	}
	return b.String()
}

func (e *ObjectError) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

func (c *Client) object(key string) string {
	if key == "" {
		return "s3://" + c.bucket
	}
	return "s3://" + c.bucket + "/" + key
}

// classify turns an error of the S3 client for op on object key ("" for the
// bucket) into an *ObjectError with the matching sentinel. The S3 error's
// text carries its code.
func (c *Client) classify(op, key string, err error) error {
	if err == nil {
		return nil
	}
	e := &ObjectError{Op: op, Object: c.object(key), Endpoint: c.endpoint, Err: err}
	var se *s3Error
	if !errors.As(err, &se) {
		return e
	}
	resp := se.resp
	switch resp.Code {
	case "NoSuchKey":
		e.Kind = ErrNotFound
	case "NoSuchBucket":
		e.Kind = ErrNoBucket
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
		"XAdminUserNotFound": // versitygw's code for an unknown access key
		e.Kind = ErrCredentials
	case "AccessDenied":
		e.Kind = ErrAccessDenied
	default:
		switch resp.StatusCode {
		case http.StatusNotFound:
			e.Kind = ErrNotFound
		case http.StatusForbidden:
			e.Kind = ErrAccessDenied
		}
	}
	return e
}

// corrupt reports that object key failed verification.
func (c *Client) corrupt(key string, cause error) error {
	return &ObjectError{Op: "get", Object: c.object(key), Kind: ErrCorrupt, Err: cause}
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
