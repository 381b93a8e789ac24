package main

import (
	"bytes"
	"testing"
)

// TestInput_TsRewrittenInPlace pins the input generator: ts moves by 1 ms
// per reading without changing the payload's length, and the session shape
// switches device sets every 30 s of event time.
func TestInput_TsRewrittenInPlace(t *testing.T) {
	in := newInput()
	p0, ts0 := in.reading(0, false)
	n0 := len(p0)
	p1, ts1 := in.reading(1001, false)
	if ts1-ts0 != 1001 || len(p1) != n0 || !bytes.Contains(p1, []byte(`"ts":1700000001001`)) {
		t.Fatalf("reading 1001: %s (ts %d)", p1, ts1)
	}
	q, _ := in.reading(30_000-int(baseTs%30_000)+5, true) // first ms of an odd 30 s period
	if !bytes.Contains(q, []byte(`"device":"sensor-1`)) {
		t.Fatalf("session input did not switch device set: %s", q)
	}
}

// TestPipeline_Shapes runs every shape briefly on both stores: readings
// pass, windows fire.
func TestPipeline_Shapes(t *testing.T) {
	for _, sh := range shapes() {
		for _, store := range []string{"memory", "bbolt"} {
			p, err := newPipeline(sh, store, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 100_000; i++ {
				p.step(i)
			}
			p.close()
			if p.out == 0 {
				t.Errorf("%s on %s: no output in 100 s of event time", sh.name, store)
			}
		}
	}
}
