package decode

import (
	"errors"
	"testing"

	"github.com/eddy-edge/eddy/operators/event"
)

func TestCSV_Decode(t *testing.T) {
	paths := []string{"device", "ts", "temp", "note"}
	tests := []struct {
		name    string
		opts    CSVOptions
		payload string
		want    []string
	}{
		{"plain", CSVOptions{Columns: []string{"device", "ts", "temp"}},
			"sensor-17,1700000000123,21.5\n", []string{"s:sensor-17", "n:1700000000123", "n:21.5", "missing"}},
		{"crlf", CSVOptions{Columns: []string{"device", "temp"}},
			"a,-3\r\n", []string{"s:a", "missing", "n:-3", "missing"}},
		{"no newline", CSVOptions{Columns: []string{"device", "temp"}},
			"a,+3.5", []string{"s:a", "missing", "n:3.5", "missing"}},
		{"number forms", CSVOptions{Columns: []string{"ts", "temp", "note"}},
			".5,1e3, 7 ", []string{"missing", "n:0.5", "n:1000", "n:7"}},
		{"non-numbers are strings", CSVOptions{Columns: []string{"ts", "temp", "note"}},
			"NaN,0x10,1_000", []string{"missing", "s:NaN", "s:0x10", "s:1_000"}},
		{"quoted stays string", CSVOptions{Columns: []string{"device", "temp"}},
			`"007","21.5"`, []string{"s:007", "missing", "s:21.5", "missing"}},
		{"quoted with delimiter quote and newline", CSVOptions{Columns: []string{"device", "note"}},
			"\"a,b\",\"say \"\"hi\"\"\nthere\"", []string{"s:a,b", "missing", "missing", "s:say \"hi\"\nthere"}},
		{"empty fields", CSVOptions{Columns: []string{"device", "temp", "note"}},
			`,"",`, []string{"null", "missing", "s:", "null"}},
		{"unregistered column skipped", CSVOptions{Columns: []string{"x", "temp"}},
			"zzz,1", []string{"missing", "missing", "n:1", "missing"}},
		{"semicolon", CSVOptions{Columns: []string{"device", "temp"}, Delimiter: ';'},
			"a,b;2,5", []string{"s:a,b", "missing", "s:2,5", "missing"}},
		{"tab", CSVOptions{Columns: []string{"device", "temp"}, Delimiter: '\t'},
			"a\t2.5", []string{"s:a", "missing", "n:2.5", "missing"}},
		{"out of range number is a string", CSVOptions{Columns: []string{"temp"}},
			"1e999", []string{"missing", "missing", "s:1e999", "missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			schema := mustSchema(t, paths...)
			d, err := NewCSV(schema, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			var rec event.Record
			if err := decodeInto(d, schema, &rec, tt.payload); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			for i, w := range tt.want {
				if got := valueString(rec.Fields[i]); got != w {
					t.Errorf("%s = %q, want %q", paths[i], got, w)
				}
			}
		})
	}
}

func TestCSV_Decode_Malformed(t *testing.T) {
	tests := []struct{ name, payload string }{
		{"empty", ""},
		{"newline only", "\n"},
		{"too few", "a,1"},
		{"too many", "a,1,2,3"},
		{"bare quote", `a"b,1,2`},
		{"text after quote", `"a"b,1,2`},
		{"unterminated quote", `"a,1,2`},
		{"two lines", "a,1,2\nb,3,4"},
		{"two lines with newline", "a,1,2\nb,3,4\n"},
		{"stray cr", "a,1\r,2"},
		{"blank then line", "\na,1,2"},
	}
	schema := mustSchema(t, "device", "ts", "temp")
	d, err := NewCSV(schema, CSVOptions{Columns: []string{"device", "ts", "temp"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec event.Record
			err := decodeInto(d, schema, &rec, tt.payload)
			var de *Error
			if !errors.As(err, &de) || de.Reason != ReasonMalformedCSV {
				t.Fatalf("Decode(%q) = %v, want malformed_csv", tt.payload, err)
			}
		})
	}
}

func TestCSV_Decode_Header(t *testing.T) {
	schema := mustSchema(t, "device", "temp", "meta.rssi")
	d, err := NewCSV(schema, CSVOptions{Header: true})
	if err != nil {
		t.Fatal(err)
	}
	var rec event.Record
	if err := decodeInto(d, schema, &rec, "\"temp\",other,device,meta.rssi\n"); !errors.Is(err, ErrHeader) {
		t.Fatalf("header line: err = %v, want ErrHeader", err)
	}
	if err := decodeInto(d, schema, &rec, "21.5,x,s1,-70\n"); err != nil {
		t.Fatal(err)
	}
	for i, w := range []string{"s:s1", "n:21.5", "n:-70"} {
		if got := valueString(rec.Fields[i]); got != w {
			t.Errorf("slot %d = %q, want %q", i, got, w)
		}
	}
	// The next line is data again, not a header: a wrong width is malformed.
	err = decodeInto(d, schema, &rec, "device,temp\n")
	var de *Error
	if !errors.As(err, &de) || de.Reason != ReasonMalformedCSV {
		t.Fatalf("short line after header: err = %v, want malformed_csv", err)
	}
}

func TestCSV_Decode_HeaderWithColumns(t *testing.T) {
	schema := mustSchema(t, "device", "temp")
	d, err := NewCSV(schema, CSVOptions{Header: true, Columns: []string{"device", "temp"}})
	if err != nil {
		t.Fatal(err)
	}
	var rec event.Record
	if err := decodeInto(d, schema, &rec, "name,value\n"); !errors.Is(err, ErrHeader) {
		t.Fatalf("header line: err = %v, want ErrHeader", err)
	}
	if err := decodeInto(d, schema, &rec, "s1,2\n"); err != nil {
		t.Fatal(err)
	}
	if got := valueString(rec.Fields[1]); got != "n:2" {
		t.Errorf("temp = %q", got)
	}
}

func TestNewCSV_Invalid(t *testing.T) {
	schema := mustSchema(t, "a")
	for _, opts := range []CSVOptions{
		{},
		{Columns: []string{"a"}, Delimiter: '"'},
		{Columns: []string{"a"}, Delimiter: '\n'},
		{Columns: []string{"a", "a"}},
		{Columns: []string{""}},
	} {
		if _, err := NewCSV(schema, opts); err == nil {
			t.Errorf("NewCSV(%+v) succeeded", opts)
		}
	}
}

func TestCSV_Decode_ZeroAllocs(t *testing.T) {
	schema := mustSchema(t, "device", "ts", "temp", "note")
	d, err := NewCSV(schema, CSVOptions{Columns: []string{"device", "ts", "temp", "humidity", "note"}})
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("sensor-17,1700000000123,21.5,40.2,\"say \"\"hi\"\"\"\n")
	var rec event.Record
	allocs := testing.AllocsPerRun(100, func() {
		rec.Reset(schema.Len())
		rec.Payload = append(rec.Payload, payload...)
		if err := d.Decode(&rec); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("allocs per line = %v, want 0", allocs)
	}
}

func BenchmarkCSV_Decode(b *testing.B) {
	schema := mustSchema(b, "device", "ts", "temp")
	d, err := NewCSV(schema, CSVOptions{Columns: []string{"device", "ts", "temp", "humidity", "rssi"}})
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte("sensor-17,1700000000123,21.5,40.2,-70\n")
	var rec event.Record
	b.ReportAllocs()
	for b.Loop() {
		rec.Reset(schema.Len())
		rec.Payload = append(rec.Payload, payload...)
		if err := d.Decode(&rec); err != nil {
			b.Fatal(err)
		}
	}
}
