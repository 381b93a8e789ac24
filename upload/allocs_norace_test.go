//go:build !race

// Allocation counts: the race detector makes sync.Pool drop items, so
// these run in the non-race pass of scripts/test.sh.

package upload

import (
	"bytes"
	"testing"
)

func TestCodec_EncodeAllocs(t *testing.T) {
	cd := mustCodec(t, bytes.Repeat([]byte{42}, 32))
	data := stateEntries(256<<10, 1)
	var out bytes.Buffer
	src := bytes.NewReader(data)
	encode := func() {
		out.Reset()
		src.Reset(data)
		if _, _, err := cd.encode(&out, src, "files/x"); err != nil {
			t.Fatal(err)
		}
	}
	encode()
	// Pooled encoder and buffers: a few small allocations per object (the
	// segment writer, the tee, and the object's key: HKDF, AES key
	// schedule, GCM), none per segment or per byte.
	if a := testing.AllocsPerRun(20, encode); a > 30 {
		t.Fatalf("%.0f allocations per encode of 256 KiB", a)
	}
}
