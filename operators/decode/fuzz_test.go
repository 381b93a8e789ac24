package decode

import (
	"bytes"
	"encoding/csv"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/event"
)

var fuzzJSONPaths = []string{"device", "ts", "temp", "meta", "meta.rssi", "a.b.c", "é"}

// FuzzJSON: arbitrary bytes never panic; the decoder accepts exactly the
// objects encoding/json accepts (up to maxDepth) and agrees with it on every
// registered path.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		sensorMessage,
		`{}`, ` { } `, `[]`, `"x"`, `1`, `null`, ``,
		`{"device":"a\"b\\c\u00e9\ud83d\ude00\ud83d","ts":-1.5e-3}`,
		`{"meta":{"rssi":[1,{"x":null}],"fw":true},"meta":false}`,
		`{"a":{"b":{"c":{"d":[[[]]]}}}}`,
		`{"temp":1e400}`, `{"temp":-0}`, `{"temp":0.1e-1}`, `{"x":01}`,
		`{"temp":123456789012345678901234567890.123456789e-10}`,
		"{\"\\u00e9\":\"\xff\xe2\x98\"}",
		`{"a":1,}`, `{"a" 1}`, `{"a":"\x"}`, `{"a":tru}`, `{"a":1}x`,
		`{"x":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAgainstEncodingJSON(t, fuzzJSONPaths, data)
	})
}

var fuzzCSVColumns = []string{"device", "ts", "temp"}

// FuzzCSV: arbitrary bytes never panic; on single-line input that
// encoding/csv reads as one record of the right width, the decoder accepts
// it and every field agrees with encoding/csv's text.
func FuzzCSV(f *testing.F) {
	for _, s := range []string{
		"sensor-17,1700000000123,21.5\n", "a,b,c", `"a,b","say ""hi""",`, ",,", "\"\",\"\",\"\"",
		`a"b,1,2`, `"a"b,1,2`, `"a,1,2`, "a,1,2\nb,3,4", "a,1\r\n", " 1 ,+2,.5e3", "1e999,NaN,-0",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		schema := mustSchema(t, fuzzCSVColumns...)
		d, err := NewCSV(schema, CSVOptions{Columns: fuzzCSVColumns})
		if err != nil {
			t.Fatal(err)
		}
		var rec event.Record
		rec.Reset(schema.Len())
		rec.Payload = append(rec.Payload, data...)
		err = d.Decode(&rec)
		var de *Error
		if err != nil && (!errors.As(err, &de) || de.Reason != ReasonMalformedCSV) {
			t.Fatalf("Decode(%q) = %v, want nil or malformed_csv", data, err)
		}
		// Compare only where the two agree on what a record is: one line,
		// no carriage returns (encoding/csv rewrites \r\n inside quotes).
		if bytes.ContainsAny(data, "\r\n") {
			return
		}
		r := csv.NewReader(bytes.NewReader(data))
		r.FieldsPerRecord = len(fuzzCSVColumns)
		records, stdErr := r.ReadAll()
		if stdErr != nil || len(records) != 1 {
			if err == nil && len(data) > 0 {
				t.Fatalf("Decode(%q) accepted; encoding/csv: %v, %d records", data, stdErr, len(records))
			}
			return
		}
		if err != nil {
			t.Fatalf("Decode(%q) = %v; encoding/csv reads %q", data, err, records[0])
		}
		for k, text := range records[0] {
			got := rec.Fields[k]
			switch got.Kind {
			case event.String:
				if string(got.Str) != text {
					t.Fatalf("Decode(%q) field %d = %q, encoding/csv %q", data, k, got.Str, text)
				}
			case event.Null:
				if text != "" {
					t.Fatalf("Decode(%q) field %d = null, encoding/csv %q", data, k, text)
				}
			case event.Number:
				num := strings.Trim(text, " \t")
				if !isDecimal([]byte(num)) {
					t.Fatalf("Decode(%q) field %d = number from %q", data, k, text)
				}
				f, ok := parseFloat([]byte(num))
				if !ok || math.Float64bits(f) != math.Float64bits(got.Num) {
					t.Fatalf("Decode(%q) field %d = %v, text %q", data, k, got.Num, text)
				}
			default:
				t.Fatalf("Decode(%q) field %d is %s", data, k, got.Kind)
			}
		}
	})
}
