package agent

import (
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/upload"
)

func TestProgressBar(t *testing.T) {
	half := progressBar(upload.Progress{Op: "download", Name: "0123456789abcdef.snap", Done: 3 << 20, Total: 6 << 20})
	if !strings.HasPrefix(half, "\r  download 0123456789ab…: [###############               ]  50% 3.0/6.0 MiB") || strings.HasSuffix(half, "\n") {
		t.Fatalf("half: %q", half)
	}
	if done := progressBar(upload.Progress{Op: "download", Name: "x", Done: 10, Total: 10}); !strings.HasSuffix(done, "\n") || !strings.Contains(done, "100%") {
		t.Fatalf("done: %q", done)
	}
}

func TestParseS3(t *testing.T) {
	cases := []struct {
		in             string
		bucket, prefix string
		id             uint64
		err            bool
	}{
		{"s3://eddy/gw-1/", "eddy", "gw-1/", 0, false},
		{"s3://eddy/gw-1", "eddy", "gw-1/", 0, false},
		{"s3://eddy/gw-1/42", "eddy", "gw-1/", 42, false},
		{"s3://eddy/fleet/gw-1/7", "eddy", "fleet/gw-1/", 7, false},
		{"s3://eddy", "eddy", "", 0, false},
		{"http://eddy/x", "", "", 0, true},
		{"s3:///x", "", "", 0, true},
	}
	for _, c := range cases {
		loc, err := ParseS3(c.in)
		if (err != nil) != c.err || err == nil && (loc.Bucket != c.bucket || loc.Prefix != c.prefix || loc.ID != c.id) {
			t.Errorf("ParseS3(%q) = %+v, %v", c.in, loc, err)
		}
	}
}
