package offsite

import "testing"

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
