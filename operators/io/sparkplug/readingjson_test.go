package sparkplug

import (
	"encoding/json"
	"math"
	"testing"
)

// TestAppendReadingJSON: each kind of value as the pipeline reads it,
// signed integers by their datatype, and a JSON text encoding/json reads.
func TestAppendReadingJSON(t *testing.T) {
	base := Reading{Group: "g", Node: "n", Device: "d", Name: []byte("temp"), Timestamp: 1700000000000}
	for _, c := range []struct {
		name string
		dt   DataType
		v    Value
		null bool
		want string
	}{
		{"double", TypeDouble, Double(21.5), false, `21.5`},
		{"float", TypeFloat, Value{Kind: KindFloat, Bits: uint64(math.Float32bits(0.5))}, false, `0.5`},
		{"int8 negative", TypeInt8, Value{Kind: KindInt, Bits: uint64(uint32(0xfffffffe))}, false, `-2`},
		{"uint32", TypeUInt32, Value{Kind: KindInt, Bits: 4000000000}, false, `4000000000`},
		{"int64 negative", TypeInt64, Long(uint64(1<<64 - 5)), false, `-5`},
		{"uint64", TypeUInt64, Long(1<<64 - 1), false, `18446744073709551615`},
		{"bool", TypeBoolean, Bool(true), false, `true`},
		{"string", TypeString, Value{Kind: KindString, Str: []byte("a\"b")}, false, `"a\"b"`},
		{"null", TypeDouble, Value{}, true, `null`},
		{"bytes", TypeBytes, Value{Kind: KindBytes, Str: []byte{1}}, false, `null`},
		{"NaN", TypeDouble, Double(math.NaN()), false, `null`},
	} {
		t.Run(c.name, func(t *testing.T) {
			rd := base
			rd.Datatype, rd.Value, rd.IsNull = c.dt, c.v, c.null
			got := string(AppendReadingJSON(nil, &rd))
			want := `{"group":"g","node":"n","device":"d","metric":"temp","value":` + c.want + `,"datatype":"` + c.dt.String() +
				`","timestamp":1700000000000,"is_historical":false,"stale":false}`
			if got != want {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(got), &m); err != nil {
				t.Fatalf("%s: %v", got, err)
			}
		})
	}
	rd := base
	rd.Timestamp, rd.Historical, rd.Stale, rd.Device = 0, true, true, ""
	if got, want := string(AppendReadingJSON(nil, &rd)), `{"group":"g","node":"n","device":"","metric":"temp","value":null,"datatype":"Unknown","is_historical":true,"stale":true}`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
