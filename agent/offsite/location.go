package offsite

import (
	"fmt"
	"strconv"
	"strings"
)

// S3Location is a parsed s3://bucket/prefix[/ID] address.
type S3Location struct {
	Bucket, Prefix string
	ID             uint64 // 0: the newest
}

// ParseS3 parses s3://bucket/prefix[/ID]. A last path element of digits
// names a checkpoint id.
func ParseS3(s string) (S3Location, error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return S3Location{}, fmt.Errorf("%q is not an s3:// address", s)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return S3Location{}, fmt.Errorf("%q names no bucket", s)
	}
	loc := S3Location{Bucket: bucket}
	prefix = strings.TrimSuffix(prefix, "/")
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 || prefix != "" {
		last := prefix[i+1:]
		if id, err := strconv.ParseUint(last, 10, 64); err == nil && len(last) > 0 {
			loc.ID = id
			prefix = prefix[:max(i, 0)]
		}
	}
	if prefix != "" {
		prefix += "/"
	}
	loc.Prefix = prefix
	return loc, nil
}
