package ingest

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestFrame_RoundTrip(t *testing.T) {
	for _, e := range []Entry{
		{},
		{Arrival: -5, Flags: FlagDup | FlagRetain, Topic: []byte("a/b"), Payload: []byte("hello")},
		testEntry(12345),
		{Topic: bytes.Repeat([]byte("t"), maxTopicLen), Payload: nil},
	} {
		b := appendFrame(nil, 42, &e)
		if len(b) != frameLen(&e) {
			t.Fatalf("frame is %d bytes, frameLen says %d", len(b), frameLen(&e))
		}
		got, size, st, reason := decodeFrame(append(b, 0xff, 0xee))
		if st != frameOK || size != len(b) {
			t.Fatalf("decode = status %d size %d (%s), want ok %d", st, size, reason, len(b))
		}
		if got.Offset != 42 || got.Arrival != e.Arrival || got.Flags != e.Flags ||
			!bytes.Equal(got.Topic, e.Topic) || !bytes.Equal(got.Payload, e.Payload) {
			t.Fatalf("decoded %+v, want %+v at 42", got, e)
		}
	}
}

func TestFrame_Decode_Damage(t *testing.T) {
	e := testEntry(7)
	good := appendFrame(nil, 7, &e)
	tests := []struct {
		name   string
		mutate func([]byte) []byte
		want   frameStatus
	}{
		{"empty", func(b []byte) []byte { return nil }, frameShort},
		{"half header", func(b []byte) []byte { return b[:5] }, frameShort},
		{"header only", func(b []byte) []byte { return b[:frameHeaderLen] }, frameShort},
		{"one byte short", func(b []byte) []byte { return b[:len(b)-1] }, frameShort},
		{"zeros", func(b []byte) []byte { return make([]byte, len(b)) }, frameBad},
		{"length too small", func(b []byte) []byte { binary.LittleEndian.PutUint32(b, 3); return b }, frameBad},
		{"length huge", func(b []byte) []byte { binary.LittleEndian.PutUint32(b, 1<<31); return b }, frameBad},
		{"length changed", func(b []byte) []byte { binary.LittleEndian.PutUint32(b, uint32(len(b)-9)); return b }, frameBad},
		{"crc flipped", func(b []byte) []byte { b[5] ^= 1; return b }, frameBad},
		{"payload flipped", func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b }, frameBad},
		{"offset flipped", func(b []byte) []byte { b[frameHeaderLen] ^= 1; return b }, frameBad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.mutate(append([]byte(nil), good...))
			if _, _, st, _ := decodeFrame(b); st != tt.want {
				t.Fatalf("status %d, want %d", st, tt.want)
			}
		})
	}
}

func TestFrame_Append_NoAlloc(t *testing.T) {
	e := testEntry(3)
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		b := buf[:0]
		for i := range 10 {
			b = appendFrame(b, uint64(i), &e)
		}
	})
	if allocs != 0 {
		t.Fatalf("appendFrame allocates %.1f times per 10 frames", allocs)
	}
}
