package decode

import (
	"testing"

	"github.com/eddy-edge/eddy/operators/event"
)

func TestRaw_Decode(t *testing.T) {
	tests := []struct{ payload, want string }{
		{"21.5", "n:21.5"},
		{" -3\r\n", "n:-3"},
		{"1e3", "n:1000"},
		{"hello", "s:hello"},
		{"21.5 C", "s:21.5 C"},
		{"", "s:"},
		{"\xff\xfe", "s:\xff\xfe"},
		{"1e999", "s:1e999"},
		{"NaN", "s:NaN"},
	}
	schema := mustSchema(t, "other", "payload")
	d := NewRaw(schema)
	for _, tt := range tests {
		var rec event.Record
		if err := decodeInto(d, schema, &rec, tt.payload); err != nil {
			t.Fatal(err)
		}
		if got := valueString(rec.Fields[1]); got != tt.want {
			t.Errorf("Decode(%q) = %q, want %q", tt.payload, got, tt.want)
		}
		if rec.Fields[0].Kind != event.Missing {
			t.Errorf("Decode(%q) filled another slot", tt.payload)
		}
	}
}

func TestRaw_Decode_Unregistered(t *testing.T) {
	schema := mustSchema(t, "temp")
	d := NewRaw(schema)
	var rec event.Record
	if err := decodeInto(d, schema, &rec, "21.5"); err != nil {
		t.Fatal(err)
	}
	if rec.Fields[0].Kind != event.Missing {
		t.Errorf("temp = %s, want missing", valueString(rec.Fields[0]))
	}
}

func TestRaw_Decode_ZeroAllocs(t *testing.T) {
	schema := mustSchema(t, "payload")
	d := NewRaw(schema)
	var rec event.Record
	for _, p := range []string{"21.5", "some text"} {
		payload := []byte(p)
		allocs := testing.AllocsPerRun(100, func() {
			rec.Reset(schema.Len())
			rec.Payload = append(rec.Payload, payload...)
			_ = d.Decode(&rec)
		})
		if allocs != 0 {
			t.Errorf("Decode(%q): allocs = %v, want 0", p, allocs)
		}
	}
}
