package decode

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/event"
)

// want is the expected value of one path in a test table: "missing", "null",
// "true", "false", "n:<float>" or "s:<string>".
func valueString(v event.Value) string {
	switch v.Kind {
	case event.Missing:
		return "missing"
	case event.Null:
		return "null"
	case event.Bool:
		if v.Truth() {
			return "true"
		}
		return "false"
	case event.Number:
		return "n:" + string(v.AppendText(nil))
	case event.String:
		return "s:" + string(v.Str)
	}
	return v.Kind.String()
}

func mustSchema(tb testing.TB, paths ...string) *event.Schema {
	tb.Helper()
	s := event.NewSchema()
	for _, p := range paths {
		s.Slot(event.Path(strings.Split(p, ".")))
	}
	return s
}

func decodeInto(d Decoder, schema *event.Schema, rec *event.Record, payload string) error {
	rec.Reset(schema.Len())
	rec.Payload = append(rec.Payload, payload...)
	return d.Decode(rec)
}

func TestJSON_Decode_Valid(t *testing.T) {
	tests := []struct {
		name    string
		paths   []string
		payload string
		want    []string
	}{
		{"sensor", []string{"device", "ts", "temp", "meta.rssi"},
			`{"device":"sensor-17","ts":1700000000123,"temp":21.5,"humidity":40.2,"meta":{"fw":"1.2.3","rssi":-70}}`,
			[]string{"s:sensor-17", "n:1700000000123", "n:21.5", "n:-70"}},
		{"space everywhere", []string{"a", "b.c"},
			" \t\r\n{ \"a\" : 1 , \"b\" : { \"c\" : \"x\" } } \n",
			[]string{"n:1", "s:x"}},
		{"empty object", []string{"a"}, `{}`, []string{"missing"}},
		{"missing", []string{"a", "b.c", "x.y.z"}, `{"b":{"d":1},"x":{"y":{}}}`, []string{"missing", "missing", "missing"}},
		{"literals", []string{"t", "f", "n"}, `{"t":true,"f":false,"n":null}`, []string{"true", "false", "null"}},
		{"deep path", []string{"payload.sensor.temp"}, `{"payload":{"sensor":{"temp":-3.25e1}}}`, []string{"n:-32.5"}},
		{"object at leaf is raw text", []string{"meta"}, `{"meta": {"fw" : "1", "x":[1,2]} }`, []string{`s:{"fw" : "1", "x":[1,2]}`}},
		{"array at leaf is raw text", []string{"a"}, `{"a":[1, {"b":2}, "]"]}`, []string{`s:[1, {"b":2}, "]"]`}},
		{"leaf and prefix both registered", []string{"meta", "meta.rssi"}, `{"meta":{"rssi":-70}}`, []string{`s:{"rssi":-70}`, "n:-70"}},
		{"path through non-object", []string{"a.b"}, `{"a":[{"b":1}]}`, []string{"missing"}},
		{"path through string", []string{"a.b"}, `{"a":"b"}`, []string{"missing"}},
		{"duplicate key last wins", []string{"a"}, `{"a":1,"a":"two"}`, []string{"s:two"}},
		{"duplicate object last wins whole", []string{"m.x", "m.y"}, `{"m":{"x":1},"m":{"y":2}}`, []string{"missing", "n:2"}},
		{"duplicate object then scalar", []string{"m.x"}, `{"m":{"x":1},"m":3}`, []string{"missing"}},
		{"skipped values of every kind", []string{"z"},
			`{"a":[],"b":{},"c":[[[]]],"d":{"e":{"f":[1,"x",true,false,null,{"g":-0.5e-3}]}},"z":0}`,
			[]string{"n:0"}},
		{"escaped key matches", []string{"temp", "ü"}, `{"te\u006dp":1,"\u00fc":2}`, []string{"n:1", "n:2"}},
		{"non-ASCII key", []string{"température"}, `{"température":3}`, []string{"n:3"}},
		{"many keys use the map", []string{"k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10"},
			`{"k10":10,"k9":9,"k1":1,"other":0}`,
			[]string{"n:1", "missing", "missing", "missing", "missing", "missing", "missing", "missing", "n:9", "n:10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			schema := mustSchema(t, tt.paths...)
			d := NewJSON(schema)
			var rec event.Record
			if err := decodeInto(d, schema, &rec, tt.payload); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			for i, w := range tt.want {
				if got := valueString(rec.Fields[i]); got != w {
					t.Errorf("%s = %q, want %q", tt.paths[i], got, w)
				}
			}
		})
	}
}

func TestJSON_Decode_Strings(t *testing.T) {
	tests := []struct {
		name, raw, want string
		aliases         bool // the value aliases the payload
	}{
		{"plain", `"abc"`, "abc", true},
		{"empty", `""`, "", true},
		{"utf8", `"héllo ☃ 😀"`, "héllo ☃ 😀", true},
		{"simple escapes", `"a\"b\\c\/d\be\ff\ng\rh\ti"`, "a\"b\\c/d\be\ff\ng\rh\ti", false},
		{"unicode escape", `"\u00e9\u2603"`, "é☃", false},
		{"upper hex", `"\u00E9"`, "é", false},
		{"surrogate pair", `"\ud83d\ude00!"`, "😀!", false},
		{"lone high surrogate", `"\ud83dx"`, "\uFFFDx", false},
		{"lone low surrogate", `"\ude00"`, "\uFFFD", false},
		{"high then non-surrogate escape", `"\ud83d\u0041"`, "\uFFFDA", false},
		{"two highs", `"\ud83d\ud83d\ude00"`, "\uFFFD😀", false},
		{"nul escape", `"\u0000"`, "\x00", false},
		{"invalid utf8 byte", "\"a\xffb\"", "a\uFFFDb", false},
		{"truncated utf8", "\"\xe2\x98\"", "\uFFFD\uFFFD", false},
		{"utf8 surrogate bytes", "\"\xed\xa0\x80\"", "\uFFFD\uFFFD\uFFFD", false},
	}
	schema := mustSchema(t, "s")
	d := NewJSON(schema)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec event.Record
			if err := decodeInto(d, schema, &rec, `{"s":`+tt.raw+`}`); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			v := rec.Fields[0]
			if v.Kind != event.String || string(v.Str) != tt.want {
				t.Fatalf("got %s, want %q", valueString(v), tt.want)
			}
			aliases := len(v.Str) > 0 && &v.Str[0] == &rec.Payload[6]
			if len(v.Str) > 0 && aliases != tt.aliases {
				t.Errorf("aliases payload = %v, want %v", aliases, tt.aliases)
			}
		})
	}
}

func TestJSON_Decode_Numbers(t *testing.T) {
	tests := []struct {
		raw  string
		want float64
	}{
		{"0", 0}, {"-0", math.Copysign(0, -1)}, {"7", 7}, {"-7", -7},
		{"1700000000123", 1700000000123}, {"21.5", 21.5}, {"-0.001", -0.001},
		{"1e3", 1000}, {"1E3", 1000}, {"1e+3", 1000}, {"1e-3", 0.001}, {"2.5E-2", 0.025},
		{"0.1", 0.1}, {"123456789012345678", 123456789012345678},
		{"9007199254740993", 9007199254740992}, // beyond 2^53: rounds to even
		{"12345678901234567890123", 1.2345678901234568e22},
		{"0.30000000000000004", 0.30000000000000004},
		{"1e22", 1e22}, {"1e23", 1e23}, {"4.9e-324", 5e-324}, {"1e-400", 0},
		{"1.7976931348623157e308", math.MaxFloat64},
		{"0.000000000000000000000000000001", 1e-30},
	}
	schema := mustSchema(t, "n")
	d := NewJSON(schema)
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			var rec event.Record
			if err := decodeInto(d, schema, &rec, `{"n":`+tt.raw+`}`); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			v := rec.Fields[0]
			if v.Kind != event.Number || math.Float64bits(v.Num) != math.Float64bits(tt.want) {
				t.Fatalf("got %s (%v), want %v", valueString(v), v.Num, tt.want)
			}
		})
	}
}

func TestJSON_Decode_Malformed(t *testing.T) {
	tests := []struct {
		name, payload, reason string
	}{
		{"empty", ``, ReasonMalformedJSON},
		{"space only", `  `, ReasonMalformedJSON},
		{"array top level", `[1]`, ReasonMalformedJSON},
		{"string top level", `"a"`, ReasonMalformedJSON},
		{"number top level", `1`, ReasonMalformedJSON},
		{"unterminated object", `{"a":1`, ReasonMalformedJSON},
		{"unterminated after comma", `{"a":1,`, ReasonMalformedJSON},
		{"unterminated key", `{"a`, ReasonMalformedJSON},
		{"no colon", `{"a" 1}`, ReasonMalformedJSON},
		{"no value", `{"a":}`, ReasonMalformedJSON},
		{"no value at end", `{"a":`, ReasonMalformedJSON},
		{"trailing comma", `{"a":1,}`, ReasonMalformedJSON},
		{"trailing comma in skipped array", `{"x":[1,]}`, ReasonMalformedJSON},
		{"leading comma", `{,"a":1}`, ReasonMalformedJSON},
		{"missing comma", `{"a":1 "b":2}`, ReasonMalformedJSON},
		{"unquoted key", `{a:1}`, ReasonMalformedJSON},
		{"single quotes", `{'a':1}`, ReasonMalformedJSON},
		{"trailing garbage", `{"a":1} x`, ReasonMalformedJSON},
		{"two objects", `{}{}`, ReasonMalformedJSON},
		{"unbalanced close", `{"a":1}}`, ReasonMalformedJSON},
		{"mismatched brackets", `{"x":[1}`, ReasonMalformedJSON},
		{"mismatched in registered raw", `{"a":{"b":[}}`, ReasonMalformedJSON},
		{"unterminated string", `{"a":"abc}`, ReasonMalformedJSON},
		{"unterminated skipped string", `{"x":"abc}`, ReasonMalformedJSON},
		{"backslash at end", `{"a":"abc\`, ReasonMalformedJSON},
		{"invalid escape", `{"a":"\x"}`, ReasonMalformedJSON},
		{"invalid escape skipped", `{"x":"\a"}`, ReasonMalformedJSON},
		{"short unicode escape", `{"a":"\u12"}`, ReasonMalformedJSON},
		{"bad hex", `{"a":"\u12g4"}`, ReasonMalformedJSON},
		{"control char", "{\"a\":\"a\nb\"}", ReasonMalformedJSON},
		{"control char in key", "{\"a\tb\":1}", ReasonMalformedJSON},
		{"bad literal", `{"a":tru}`, ReasonMalformedJSON},
		{"bad literal skipped", `{"x":nul}`, ReasonMalformedJSON},
		{"literal with suffix", `{"a":truex}`, ReasonMalformedJSON},
		{"capital literal", `{"a":True}`, ReasonMalformedJSON},
		{"leading zero", `{"a":01}`, ReasonMalformedJSON},
		{"plus sign", `{"a":+1}`, ReasonMalformedJSON},
		{"bare minus", `{"a":-}`, ReasonMalformedJSON},
		{"trailing dot", `{"a":1.}`, ReasonMalformedJSON},
		{"leading dot", `{"a":.5}`, ReasonMalformedJSON},
		{"empty exponent", `{"a":1e}`, ReasonMalformedJSON},
		{"signed empty exponent", `{"a":1e+}`, ReasonMalformedJSON},
		{"hex number", `{"a":0x10}`, ReasonMalformedJSON},
		{"NaN", `{"a":NaN}`, ReasonMalformedJSON},
		{"Infinity", `{"x":-Infinity}`, ReasonMalformedJSON},
		{"comment", `{"a":1 /* c */}`, ReasonMalformedJSON},
		{"number overflow", `{"a":1e400}`, ReasonWrongType},
		{"too deep registered", `{"a":` + strings.Repeat(`{"a":`, 64) + `1` + strings.Repeat(`}`, 65), ReasonMalformedJSON},
		{"too deep skipped", `{"x":` + strings.Repeat(`[`, 64) + strings.Repeat(`]`, 64) + `}`, ReasonMalformedJSON},
		{"very deep", `{"x":` + strings.Repeat(`[`, 1_000_000), ReasonMalformedJSON},
	}
	schema := mustSchema(t, "a", "a.b")
	d := NewJSON(schema)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec event.Record
			err := decodeInto(d, schema, &rec, tt.payload)
			var de *Error
			if !errors.As(err, &de) {
				t.Fatalf("Decode(%q) = %v, want a *Error", tt.payload, err)
			}
			if de.Reason != tt.reason {
				t.Fatalf("Reason = %q, want %q (%v)", de.Reason, tt.reason, err)
			}
			if !strings.HasPrefix(err.Error(), "decode: "+tt.reason) {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

func TestJSON_Decode_DepthLimit(t *testing.T) {
	schema := mustSchema(t, "a")
	d := NewJSON(schema)
	for _, tt := range []struct {
		depth int
		ok    bool
	}{{63, true}, {64, true}, {65, false}} {
		// The top-level object is depth 1; "x" holds depth-1 nested arrays.
		inner := tt.depth - 1
		payload := `{"x":` + strings.Repeat("[", inner) + strings.Repeat("]", inner) + `,"a":1}`
		var rec event.Record
		err := decodeInto(d, schema, &rec, payload)
		if (err == nil) != tt.ok {
			t.Errorf("depth %d: err = %v, want ok=%v", tt.depth, err, tt.ok)
		}
	}
}

func TestJSON_Decode_ShortRecordPanics(t *testing.T) {
	schema := mustSchema(t, "a", "b")
	d := NewJSON(schema)
	defer func() {
		if recover() == nil {
			t.Fatal("Decode did not panic on a record with too few slots")
		}
	}()
	rec := event.Record{Payload: []byte(`{}`)}
	_ = d.Decode(&rec)
}

const sensorMessage = `{"device":"sensor-17","ts":1700000000123,"temp":21.5,"humidity":40.2,"meta":{"fw":"1.2.3","rssi":-70}}`

func TestJSON_Decode_ZeroAllocs(t *testing.T) {
	tests := []struct{ name, payload string }{
		{"sensor", sensorMessage},
		{"escapes", `{"device":"sen\"sor\u00e9","ts":1.7e12,"temp":"\ud83d\ude00","meta":{"rssi":[1,2]}}`},
		{"long number", `{"device":"d","ts":1700000000123.000000000000000000000001,"temp":21.5}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			schema := mustSchema(t, "device", "ts", "temp", "meta.rssi")
			d := NewJSON(schema)
			var rec event.Record
			payload := []byte(tt.payload)
			allocs := testing.AllocsPerRun(100, func() {
				rec.Reset(schema.Len())
				rec.Payload = append(rec.Payload, payload...)
				if err := d.Decode(&rec); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("allocs per message = %v, want 0", allocs)
			}
		})
	}
}

func BenchmarkJSON_Decode_Sensor(b *testing.B) {
	schema := mustSchema(b, "device", "ts", "temp", "meta.rssi")
	d := NewJSON(schema)
	var rec event.Record
	payload := []byte(sensorMessage)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		rec.Reset(schema.Len())
		rec.Payload = append(rec.Payload, payload...)
		if err := d.Decode(&rec); err != nil {
			b.Fatal(err)
		}
	}
}
