package state

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update rewrites the golden value envelopes: go test ./state/ -run TestGolden -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenEnvelopes is what testdata/golden-envelopes.bin holds, back to
// back: a plain and a stamped value, a plain and a stamped list of two
// elements.
func goldenEnvelopes() [][]byte {
	const now = 1_700_000_000_000
	list := func(stamped bool) []byte {
		b := []byte{tagPlain} // a list's stamps are per element, not in the header
		if stamped {
			b[0] = tagStamped
		}
		b = appendElement(b, stamped, now-5, []byte("first"))
		return appendElement(b, stamped, now, []byte{})
	}
	return [][]byte{
		append(appendHeader(nil, false, now), "payload"...),
		append(appendHeader(nil, true, now), "payload"...),
		list(false),
		list(true),
	}
}

// TestGolden_ValueEnvelopes: testdata/golden-envelopes.bin holds the value
// envelopes of typed keyed state (the tag byte versions the layout) as
// this build writes them, each preceded by its length byte; each decodes
// to what it was made from. A difference means the encoding changed: give
// the new layout a new tag and run with -update.
func TestGolden_ValueEnvelopes(t *testing.T) {
	var got []byte
	for _, e := range goldenEnvelopes() {
		got = append(append(got, byte(len(e))), e...)
	}
	path := filepath.Join("testdata", "golden-envelopes.bin")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("this build encodes %x, the golden file holds %x: the encoding changed: give it a new tag and run with -update", got, want)
	}
	var vs [][]byte
	for b := want; len(b) > 0; {
		n := int(b[0])
		if n+1 > len(b) {
			t.Fatal("golden envelopes: bad length")
		}
		vs, b = append(vs, b[1:1+n]), b[1+n:]
	}
	if len(vs) != 4 {
		t.Fatalf("golden envelopes: %d values, want 4", len(vs))
	}
	for i, stamped := range []bool{false, true} {
		p, ts, st, err := openValue(vs[i])
		if err != nil || string(p) != "payload" || st != stamped || (stamped && ts != 1_700_000_000_000) {
			t.Errorf("golden value %d: %q %d %v %v", i, p, ts, st, err)
		}
		v := vs[2+i]
		st, err = listTag(v)
		if err != nil || st != stamped {
			t.Fatalf("golden list %d: stamped %v, %v", i, st, err)
		}
		rest := v[1:]
		var elems []string
		var stamps []int64
		for len(rest) > 0 {
			ts, e, r, err := nextElement(rest, stamped)
			if err != nil {
				t.Fatal(err)
			}
			elems, stamps, rest = append(elems, string(e)), append(stamps, ts), r
		}
		if len(elems) != 2 || elems[0] != "first" || elems[1] != "" || (stamped && (stamps[0] != 1_700_000_000_000-5 || stamps[1] != 1_700_000_000_000)) {
			t.Errorf("golden list %d reads as %q %v", i, elems, stamps)
		}
	}
}
