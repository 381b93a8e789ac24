package sparkplug

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzDecodePayload: any input decodes or fails with a *DecodeError (or
// ErrEmpty) that says where, never a panic; and what decodes is stable:
// encoded and decoded again, it reads the same (but for the values the
// codec skips, which it does not write), and encoding that gives the same
// bytes.
func FuzzDecodePayload(f *testing.F) {
	for _, p := range samplePayloads() {
		f.Add(AppendPayload(nil, &p))
	}
	for _, g := range goldenPayloads {
		f.Add(g.wire)
	}
	f.Add([]byte{})
	f.Add([]byte{0x12, 0x05, 0x0a})
	f.Add([]byte{0x0b, 0x0c})
	f.Add([]byte{0x12, 0x04, 0x8A, 0x01, 0x01, 0x08}) // a data set value, skipped
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Payload
		err := DecodePayload(b, &p)
		if err != nil {
			var de *DecodeError
			if !errors.Is(err, ErrEmpty) && !errors.As(err, &de) {
				t.Fatalf("error %T %v", err, err)
			}
			if !strings.HasPrefix(err.Error(), "sparkplug: ") {
				t.Fatalf("error %q does not say it is Sparkplug's", err)
			}
			if de != nil && (de.Offset < 0 || de.Offset > len(b)) {
				t.Fatalf("error offset %d outside the %d-byte payload", de.Offset, len(b))
			}
			return
		}
		for i := range p.Metrics {
			if p.Metrics[i].Value.Kind == KindUnsupported {
				p.Metrics[i].Value = Value{}
			}
		}
		enc := AppendPayload(nil, &p)
		var again Payload
		err = DecodePayload(enc, &again)
		if len(enc) == 0 {
			// Only unknown fields: nothing to write.
			if !errors.Is(err, ErrEmpty) {
				t.Fatalf("an empty re-encoding decodes with %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("re-encoded payload does not decode: %v", err)
		}
		if !equalPayload(again, p) {
			t.Fatalf("re-encoded\n %+v\nwas\n %+v", again, p)
		}
		if enc2 := AppendPayload(nil, &again); !bytes.Equal(enc2, enc) {
			t.Fatalf("encoded a second time\n % x\nthe first\n % x", enc2, enc)
		}
	})
}

// FuzzReaderMessage: a Reader fed a session's messages and then anything
// on any Sparkplug topic neither panics nor refuses without a known
// reason and a detail; every reading it emits is valid JSON as the
// source hands it to a pipeline (AppendReadingJSON).
func FuzzReaderMessage(f *testing.F) {
	n, err := NewNode(Config{Group: "g", Node: "n"})
	if err != nil {
		f.Fatal(err)
	}
	var session []Action
	keep := func(acts []Action) {
		for _, a := range acts {
			a.Payload = append([]byte(nil), a.Payload...)
			session = append(session, a)
		}
	}
	will := n.Connect(1, 1)
	will.Payload = append([]byte(nil), will.Payload...)
	keep(n.Connected(2))
	acts, _ := n.Result([]byte("d"), []string{"a", "b"}, []float64{1, 2}, 3, false, 4)
	keep(acts)
	for _, a := range append(session, will) {
		f.Add(uint8(6), a.Payload)
		f.Add(uint8(1), a.Payload)
	}
	topics := []string{"spBv1.0/g/NBIRTH/n", "spBv1.0/g/NDEATH/n", "spBv1.0/g/NDATA/n", "spBv1.0/g/DBIRTH/n/d",
		"spBv1.0/g/DDEATH/n/d", "spBv1.0/g/DDATA/n/d", "spBv1.0/g/NCMD/n", "spBv1.0/STATE/h", "spBv1.0/g/DDATA/n/e"}
	f.Fuzz(func(t *testing.T, topic uint8, payload []byte) {
		r := NewReader()
		for _, a := range session {
			if reason, detail := r.Message(a.Topic, a.Payload, func(*Reading) {}); reason != "" {
				t.Fatalf("the session's own %s refused: %s %s", a.Topic, reason, detail)
			}
		}
		var buf []byte
		for range 2 {
			reason, detail := r.Message(topics[int(topic)%len(topics)], payload, func(rd *Reading) {
				if rd.Name == nil {
					t.Fatalf("%s %x: a reading without a name: %+v", topics[int(topic)%len(topics)], payload, rd)
				}
				if buf = AppendReadingJSON(buf[:0], rd); !json.Valid(buf) {
					t.Fatalf("%s %x: reading as invalid JSON %s", topics[int(topic)%len(topics)], payload, buf)
				}
			})
			if reason != "" && detail == "" {
				t.Fatalf("refused (%s) without a detail", reason)
			}
			switch reason {
			case "", ReasonBadPayload, ReasonBeforeBirth, ReasonSeqGap, ReasonUnknownAlias:
			default:
				t.Fatalf("refused with an unknown reason %q (%s)", reason, detail)
			}
		}
	})
}

// FuzzReaderRestore: any bytes restore or fail with an error, never a
// panic, and what restores snapshots to itself.
func FuzzReaderRestore(f *testing.F) {
	r := NewReader()
	r.Message("spBv1.0/g/NBIRTH/n", AppendPayload(nil, &Payload{HasSeq: true, Metrics: []Metric{{Name: []byte("x"), Alias: 1, HasAlias: true, Datatype: TypeDouble, Value: Double(1)}}}), func(*Reading) {})
	r.Message("spBv1.0/g/DBIRTH/n/d", AppendPayload(nil, &Payload{Seq: 1, HasSeq: true, Metrics: []Metric{{Name: []byte("s"), Alias: 2, HasAlias: true, Datatype: TypeString, Value: Value{Kind: KindString, Str: []byte("v")}}}}), func(*Reading) {})
	f.Add(r.AppendSnapshot(nil))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader()
		if r.Restore(b) != nil {
			return
		}
		again := NewReader()
		if err := again.Restore(r.AppendSnapshot(nil)); err != nil {
			t.Fatalf("a restored state's snapshot does not restore: %v", err)
		}
	})
}
