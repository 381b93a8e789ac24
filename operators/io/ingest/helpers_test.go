package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
)

// testEntry is the content the tests store at offset off: a topic and a
// payload of varying length, both derived from off so any entry can be
// checked on its own.
func testEntry(off uint64) Entry {
	topic := fmt.Appendf(nil, "sensors/d%d/telemetry", off%7)
	payload := fmt.Appendf(nil, `{"seq":%d,"pad":"`, off)
	payload = append(payload, bytes.Repeat([]byte{'x'}, int(off*31%97))...)
	payload = append(payload, `"}`...)
	return Entry{Arrival: int64(1_700_000_000_000 + off), Flags: Flags(off % 2), Topic: topic, Payload: payload}
}

func mustOpen(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return l
}

// mustAppend appends the test entries for offsets LastOffset()+1 … +n in
// batches of batch.
func mustAppend(t testing.TB, l *Log, n, batch int) {
	t.Helper()
	for n > 0 {
		k := min(n, batch)
		next := l.LastOffset() + 1
		b := make([]Entry, k)
		for i := range b {
			b[i] = testEntry(next + uint64(i))
		}
		first, last, err := l.Append(b)
		if err != nil {
			t.Fatalf("Append(%d entries at %d): %v", k, next, err)
		}
		if first != next || last != next+uint64(k)-1 {
			t.Fatalf("Append returned [%d, %d], want [%d, %d]", first, last, next, next+uint64(k)-1)
		}
		n -= k
	}
}

// checkEntry fails the test unless e is the test entry for its offset.
func checkEntry(t testing.TB, e Entry, want uint64) {
	t.Helper()
	w := testEntry(want)
	if e.Offset != want || e.Arrival != w.Arrival || e.Flags != w.Flags ||
		!bytes.Equal(e.Topic, w.Topic) || !bytes.Equal(e.Payload, w.Payload) {
		t.Fatalf("entry = {%d %d %d %q %q}, want offset %d {%d %d %q %q}",
			e.Offset, e.Arrival, e.Flags, e.Topic, e.Payload, want, w.Arrival, w.Flags, w.Topic, w.Payload)
	}
}

// readAll reads from offset from to the end and checks every entry,
// returning the number read.
func readAll(t testing.TB, l *Log, from uint64) int {
	t.Helper()
	r, err := l.Reader(from)
	if err != nil {
		t.Fatalf("Reader(%d): %v", from, err)
	}
	defer r.Close()
	want := from
	if want == 0 {
		want = l.FirstOffset()
	}
	n := 0
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Next after %d entries from %d: %v", n, from, err)
		}
		checkEntry(t, e, want)
		want++
		n++
	}
	if last := l.LastOffset(); want != last+1 {
		t.Fatalf("reader from %d stopped at %d, last offset %d", from, want, last)
	}
	return n
}

// testFrame is the frame an uncompressed Append of the test entries
// first..last writes.
func testFrame(first, last uint64) []byte {
	var batch []Entry
	for off := first; off <= last; off++ {
		batch = append(batch, testEntry(off))
	}
	b, _ := appendFrame(nil, first, batch, CompressNone, nil)
	return b
}

// noise is n pseudo-random bytes, which no codec makes smaller.
func noise(n int) []byte {
	b := make([]byte, n)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// frameCodecs is the codec byte of every frame of the segment
// file at path, in order.
func frameCodecs(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var codecs []byte
	for rest := b[headerLen:]; len(rest) > 0; {
		_, size, st, reason := frameAt(rest, bodyFixedLen)
		if st != frameOK {
			t.Fatalf("%s: frame at %d: status %d (%s)", path, len(b)-len(rest), st, reason)
		}
		codecs = append(codecs, rest[frameOverhead-1])
		rest = rest[size:]
	}
	return codecs
}
