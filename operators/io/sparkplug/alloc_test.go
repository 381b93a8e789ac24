//go:build !race

package sparkplug

import "testing"

// The allocation counts live here, out of the race build, which distorts
// them (scripts/test.sh runs this file's tests without -race).

// TestPayload_DecodeReusesMetrics: a second decode into the same Payload
// allocates nothing.
func TestPayload_DecodeReusesMetrics(t *testing.T) {
	p := samplePayloads()["every kind"]
	b := AppendPayload(nil, &p)
	var got Payload
	if err := DecodePayload(b, &got); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = DecodePayload(b, &got) }); n != 0 {
		t.Fatalf("DecodePayload allocates %v times per call", n)
	}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = AppendPayload(buf[:0], &p) }); n != 0 {
		t.Fatalf("AppendPayload allocates %v times per call", n)
	}
}

// TestNode_DDataDoesNotAllocate: the per-result path reuses the node's
// buffers and cached topics.
func TestNode_DDataDoesNotAllocate(t *testing.T) {
	n := newNode(t, "")
	n.Connect(0, 1)
	n.Connected(2)
	key := []byte("k")
	must(n.Result(key, names, values, 1, false, 1))
	if a := testing.AllocsPerRun(200, func() { must(n.Result(key, names, values, 2, false, 2)) }); a != 0 {
		t.Fatalf("Result allocates %v times per DDATA", a)
	}
}

// TestReader_DDataDoesNotAllocate: a source reads each message through
// the Reader; a DDATA of known aliases costs no allocation.
func TestReader_DDataDoesNotAllocate(t *testing.T) {
	n := newNode(t, "")
	r := NewReader()
	feed := func(acts []Action) {
		for _, a := range acts {
			if reason, detail := r.Message(a.Topic, a.Payload, func(*Reading) {}); reason != "" {
				t.Fatal(reason, detail)
			}
		}
	}
	n.Connect(0, 1)
	feed(n.Connected(2))
	feed(must(n.Result([]byte("k"), names, values, 1, false, 1)))
	emit := func(*Reading) {}
	if a := testing.AllocsPerRun(200, func() {
		acts := must(n.Result([]byte("k"), names, values, 2, false, 2))
		if reason, _ := r.Message(acts[0].Topic, acts[0].Payload, emit); reason != "" {
			t.Fatal(reason)
		}
	}); a != 0 {
		t.Fatalf("a DDATA through Node and Reader allocates %v times", a)
	}
}
