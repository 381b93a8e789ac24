package source

import (
	"bytes"
	"testing"
)

func TestArena_Copy(t *testing.T) {
	var a arena
	in := [][]byte{[]byte("one"), []byte("two"), bytes.Repeat([]byte("x"), arenaChunk), {}, []byte("three")}
	var out [][]byte
	for _, b := range in {
		out = append(out, a.copy(b))
	}
	for i := range in {
		if !bytes.Equal(in[i], out[i]) {
			t.Fatalf("copy %d = %q, want %q", i, out[i], in[i])
		}
	}
	// Appending to a copy must not overwrite its neighbour.
	_ = append(out[0], "XXX"...)
	if string(out[1]) != "two" {
		t.Fatalf("append to a copy overwrote the next one: %q", out[1])
	}
	in[0][0] = 'O'
	if string(out[0]) != "one" {
		t.Fatal("copy aliases its input")
	}
}

func TestArena_Allocs(t *testing.T) {
	var a arena
	payload := []byte(`{"device":"sensor-3","ts":1700000000000,"temp":21.53,"humidity":40.1}`)
	allocs := testing.AllocsPerRun(10000, func() { a.copy(payload) })
	if allocs > 0.01 {
		t.Fatalf("arena.copy: %v allocs per small payload, want ~1 per %d bytes", allocs, arenaChunk)
	}
}
