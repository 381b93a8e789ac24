package agent

import (
	"testing"
	"time"

	"github.com/eddy-edge/eddy/config"
)

// dedup_key reads the id from the JSON payload: strings and numbers are
// distinct ids, a nested path works, and a message without the field, with
// a null, or malformed has no id (it is kept).
func TestDedupOptions_Key(t *testing.T) {
	opts := dedupOptions(&config.MQTTSource{DedupKey: "meta.id", DedupWindow: time.Minute})
	if opts.Key == nil || opts.WindowMs != 60_000 || opts.Window != config.DedupMaxIDs {
		t.Fatalf("options: %+v", opts)
	}
	tests := []struct {
		payload string
		ok      bool
		key     string
	}{
		{`{"meta":{"id":"r-7"},"v":1}`, true, "r-7"},
		{`{"meta":{"id":7},"v":1}`, true, "7"},
		{`{"v":1}`, false, ""},
		{`{"meta":{"id":null}}`, false, ""},
		{`{"meta":`, false, ""},
	}
	for _, tt := range tests {
		k, ok := opts.Key([]byte("t"), []byte(tt.payload))
		if ok != tt.ok || (ok && string(k[1:]) != tt.key) {
			t.Errorf("%s: key %q, %v; want %q, %v", tt.payload, k, ok, tt.key, tt.ok)
		}
	}
	str, _ := opts.Key([]byte("t"), []byte(`{"meta":{"id":"7"}}`))
	str = append([]byte(nil), str...) // the next call reuses the buffer
	num, _ := opts.Key([]byte("t"), []byte(`{"meta":{"id":7}}`))
	if string(str) == string(num) {
		t.Errorf("the string \"7\" and the number 7 give the same id %q", str)
	}
	if o := dedupOptions(&config.MQTTSource{}); o.Key != nil {
		t.Error("a key function without dedup_key")
	}
}
