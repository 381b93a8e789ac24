package sparkplug

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/scripts/sparkplugjs"
)

// TestInterop_TahuDecodesOurMessages: Cirrus Link's decoder
// (sparkplug-payload) reads every message a session publishes — the
// NDEATH will, NBIRTH, DBIRTHs, DDATAs (live, historical, with a null),
// a rebirth — with the bdSeq, seq, datatypes, values and timestamps the
// session was given.
func TestInterop_TahuDecodesOurMessages(t *testing.T) {
	n := newNode(t, "")
	type sent struct {
		topic   string
		payload []byte
	}
	var msgs []sent
	keep := func(acts []Action) {
		for _, a := range acts {
			msgs = append(msgs, sent{a.Topic, append([]byte(nil), a.Payload...)})
		}
	}
	keep([]Action{n.Connect(200, 1795946400000)})
	keep(n.Connected(1795946400001))
	type result struct {
		key        string
		values     []float64
		ts         int64
		historical bool
	}
	results := []result{
		{"sensor-3", []float64{21.43, 22.1, 20.9, 12}, 1795946340000, true},
		{"site/b", []float64{-1e-300, math.MaxFloat64, 0, 1}, 1795946400000, false},
		{"sensor-3", []float64{21.5, 23, math.NaN(), 13}, 1795946400000, false},
	}
	for i, r := range results {
		keep(must(n.Result([]byte(r.key), names, r.values, r.ts, r.historical, 1795946460000+int64(i))))
	}
	acts, err := n.Command(AppendPayload(nil, &Payload{Timestamp: 1, HasTimestamp: true,
		Metrics: []Metric{{Name: []byte(RebirthMetric), Datatype: TypeBoolean, Value: Bool(true)}}}), 1795946470000)
	if err != nil {
		t.Fatal(err)
	}
	keep(acts)

	var payloads [][]byte
	for _, m := range msgs {
		payloads = append(payloads, m.payload)
	}
	decoded, _ := sparkplugjs.Run(t, payloads, nil)
	if len(decoded) != len(msgs) {
		t.Fatalf("decoded %d of %d payloads", len(decoded), len(msgs))
	}
	wantTopics := []string{"NDEATH/gw-7", "NBIRTH/gw-7", "DBIRTH/gw-7/sensor-3", "DDATA/gw-7/sensor-3",
		"DBIRTH/gw-7/site%2Fb", "DDATA/gw-7/site%2Fb", "DDATA/gw-7/sensor-3",
		"NBIRTH/gw-7", "DBIRTH/gw-7/sensor-3", "DBIRTH/gw-7/site%2Fb"}
	if len(msgs) != len(wantTopics) {
		t.Fatalf("%d messages, want %d", len(msgs), len(wantTopics))
	}
	aliasName := map[string]string{}
	last := map[string]result{}
	nextSeq := 0
	ddata := 0
	for i, m := range msgs {
		got := decoded[i]
		if m.topic != "spBv1.0/plant1/"+wantTopics[i] {
			t.Fatalf("message %d on %s, want %s", i, m.topic, wantTopics[i])
		}
		where := fmt.Sprintf("message %d (%s)", i, wantTopics[i])
		if got.Timestamp == nil {
			t.Errorf("%s: no payload timestamp", where)
		}
		// seq: none in NDEATH, 0 in NBIRTH, then one more per message.
		switch {
		case i == 0:
			if got.Seq != nil {
				t.Errorf("%s: NDEATH has seq %v", where, got.Seq)
			}
		default:
			if wantTopics[i] == "NBIRTH/gw-7" {
				nextSeq = 0
			}
			if str(got.Seq) != strconv.Itoa(nextSeq) {
				t.Errorf("%s: seq %v, want %d", where, got.Seq, nextSeq)
			}
			nextSeq++
		}
		switch wantTopics[i][:6] {
		case "NDEATH", "NBIRTH":
			bd := findMetric(t, got, "bdSeq")
			if bd.Type != "UInt64" || str(bd.Value) != "200" {
				t.Errorf("%s: bdSeq %+v, want UInt64 200", where, bd)
			}
			if wantTopics[i][:6] == "NBIRTH" {
				rb := findMetric(t, got, RebirthMetric)
				if rb.Type != "Boolean" || rb.Value != false {
					t.Errorf("%s: rebirth metric %+v", where, rb)
				}
			}
		case "DBIRTH":
			if len(got.Metrics) != len(names) {
				t.Fatalf("%s: %d metrics", where, len(got.Metrics))
			}
			// A first birth carries the result its DDATA follows with; a
			// rebirth, the device's last result.
			dev := wantTopics[i][len("DBIRTH/"):]
			r := last[dev]
			if i+1 < len(msgs) && wantTopics[i+1] == "DDATA/"+dev {
				r = results[ddata]
			}
			for j, mt := range got.Metrics {
				if mt.Name == nil || *mt.Name != names[j] || mt.Type != "Double" || mt.Alias == nil {
					t.Errorf("%s: metric %d: %+v", where, j, mt)
					continue
				}
				aliasName[str(mt.Alias)] = *mt.Name
				if str(mt.Timestamp) != strconv.FormatInt(r.ts, 10) || !sameValue(mt.Value, r.values[j]) {
					t.Errorf("%s: metric %d: %v at %v, want %v at %d", where, j, mt.Value, mt.Timestamp, r.values[j], r.ts)
				}
			}
		case "DDATA/":
			r := results[ddata]
			last[wantTopics[i][len("DDATA/"):]] = r
			ddata++
			for j, mt := range got.Metrics {
				if mt.Name != nil || aliasName[str(mt.Alias)] != names[j] {
					t.Errorf("%s: metric %d: alias %v names %q, want %q", where, j, mt.Alias, aliasName[str(mt.Alias)], names[j])
				}
				if mt.Type != "Double" {
					t.Errorf("%s: metric %d: type %q, want Double", where, j, mt.Type)
				}
				if str(mt.Timestamp) != strconv.FormatInt(r.ts, 10) {
					t.Errorf("%s: metric %d: timestamp %v, want %d", where, j, mt.Timestamp, r.ts)
				}
				if (mt.IsHistorical != nil && *mt.IsHistorical) != r.historical {
					t.Errorf("%s: metric %d: isHistorical %v, want %v", where, j, mt.IsHistorical, r.historical)
				}
				if !sameValue(mt.Value, r.values[j]) {
					t.Errorf("%s: metric %d: value %v, want %v", where, j, mt.Value, r.values[j])
				}
			}
		}
	}
	if ddata != len(results) {
		t.Fatalf("%d DDATA, want %d", ddata, len(results))
	}
}

// TestInterop_TahuDecodesOurPayloads: sparkplug-payload reads payloads
// AppendPayload writes with every datatype that has a value field — signed
// and unsigned extremes, 64-bit ones, floats at their limits, empty and
// non-ASCII strings, bytes — with nulls, aliases (up to 1<<40), metric
// timestamps, the historical and transient flags, a uuid, and a payload
// without timestamp or seq, as the values given; and it names each
// datatype number as DataType.String does.
func TestInterop_TahuDecodesOurPayloads(t *testing.T) {
	i32 := func(v int32) Value { return Value{Kind: KindInt, Bits: uint64(uint32(v))} }
	u32 := func(v uint32) Value { return Value{Kind: KindInt, Bits: uint64(v)} }
	f32 := func(v float32) Value { return Value{Kind: KindFloat, Bits: uint64(math.Float32bits(v))} }
	strv := func(s string) Value { return Value{Kind: KindString, Str: []byte(s)} }
	bytesv := func(b []byte) Value { return Value{Kind: KindBytes, Str: b} }
	allBytes := make([]byte, 256)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	// want is the value as sparkplug-payload shows it (64-bit integers as
	// decimal strings, bytes as base64); "-" is not compared: version 1.0.3
	// reads UInt32 from long_value, where the specification puts it in
	// int_value.
	type check struct {
		m    Metric
		want string
	}
	metrics := []check{
		{Metric{Name: []byte("i8 min"), Datatype: TypeInt8, Value: i32(math.MinInt8)}, "-128"},
		{Metric{Name: []byte("i8 max"), Datatype: TypeInt8, Value: i32(math.MaxInt8)}, "127"},
		{Metric{Name: []byte("i16 min"), Datatype: TypeInt16, Value: i32(math.MinInt16)}, "-32768"},
		{Metric{Name: []byte("i32 min"), Datatype: TypeInt32, Value: i32(math.MinInt32)}, "-2147483648"},
		{Metric{Name: []byte("i32 max"), Datatype: TypeInt32, Value: i32(math.MaxInt32)}, "2147483647"},
		{Metric{Name: []byte("i64 min"), Datatype: TypeInt64, Value: Long(1 << 63)}, "-9223372036854775808"},
		{Metric{Name: []byte("i64 max"), Datatype: TypeInt64, Value: Long(math.MaxInt64)}, "9223372036854775807"},
		{Metric{Name: []byte("i64 -1"), Datatype: TypeInt64, Value: Long(math.MaxUint64)}, "-1"},
		{Metric{Name: []byte("u8 max"), Datatype: TypeUInt8, Value: u32(math.MaxUint8)}, "255"},
		{Metric{Name: []byte("u16 max"), Datatype: TypeUInt16, Value: u32(math.MaxUint16)}, "65535"},
		{Metric{Name: []byte("u32 max"), Datatype: TypeUInt32, Value: u32(math.MaxUint32)}, "-"},
		{Metric{Name: []byte("u64 max"), Datatype: TypeUInt64, Value: Long(math.MaxUint64)}, "18446744073709551615"},
		{Metric{Name: []byte("u64 0"), Datatype: TypeUInt64, Value: Long(0)}, "0"},
		{Metric{Name: []byte("f"), Datatype: TypeFloat, Value: f32(1.5)}, "1.5"},
		{Metric{Name: []byte("f max"), Datatype: TypeFloat, Value: f32(math.MaxFloat32)}, fmtFloat(math.MaxFloat32)},
		{Metric{Name: []byte("f tiny"), Datatype: TypeFloat, Value: f32(-math.SmallestNonzeroFloat32)}, fmtFloat(-math.SmallestNonzeroFloat32)},
		{Metric{Name: []byte("d max"), Datatype: TypeDouble, Value: Double(math.MaxFloat64)}, fmtFloat(math.MaxFloat64)},
		{Metric{Name: []byte("d tiny"), Datatype: TypeDouble, Value: Double(math.SmallestNonzeroFloat64)}, fmtFloat(math.SmallestNonzeroFloat64)},
		{Metric{Name: []byte("d neg"), Datatype: TypeDouble, Value: Double(-1e-300)}, "-1e-300"},
		{Metric{Name: []byte("true"), Datatype: TypeBoolean, Value: Bool(true)}, "true"},
		{Metric{Name: []byte("false"), Datatype: TypeBoolean, Value: Bool(false)}, "false"},
		{Metric{Name: []byte("s"), Datatype: TypeString, Value: strv("héllo/wörld ✓")}, "héllo/wörld ✓"},
		{Metric{Name: []byte("s empty"), Datatype: TypeString, Value: strv("")}, ""},
		{Metric{Name: []byte("text"), Datatype: TypeText, Value: strv("line 1\nline 2")}, "line 1\nline 2"},
		{Metric{Name: []byte("uuid"), Datatype: TypeUUID, Value: strv("123e4567-e89b-12d3-a456-426614174000")}, "123e4567-e89b-12d3-a456-426614174000"},
		{Metric{Name: []byte("time"), Datatype: TypeDateTime, Value: Long(1795946400000)}, "1795946400000"},
		{Metric{Name: []byte("bytes"), Datatype: TypeBytes, Value: bytesv(allBytes)}, "base64:" + base64.StdEncoding.EncodeToString(allBytes)},
		{Metric{Name: []byte("file"), Datatype: TypeFile, Value: bytesv([]byte("%PDF"))}, "base64:" + base64.StdEncoding.EncodeToString([]byte("%PDF"))},
		{Metric{Name: []byte("d null"), Datatype: TypeDouble, IsNull: true}, "null"},
		{Metric{Name: []byte("i64 null"), Datatype: TypeInt64, IsNull: true}, "null"},
		{Metric{Name: []byte("s null"), Datatype: TypeString, IsNull: true}, "null"},
		{Metric{Name: []byte{}, Alias: 0, HasAlias: true, Datatype: TypeInt32, Value: i32(-1)}, "-1"},
		{Metric{Name: []byte("flags"), Alias: 7, HasAlias: true, Timestamp: 1795946340000, HasTimestamp: true, Datatype: TypeDouble,
			IsHistorical: true, IsTransient: true, Value: Double(21.43)}, "21.43"},
	}
	data := []check{
		{Metric{Alias: 1 << 40, HasAlias: true, Timestamp: 1, HasTimestamp: true, Datatype: TypeDouble, IsHistorical: true, Value: Double(-2.5)}, "-2.5"},
		{Metric{Alias: 7, HasAlias: true, Datatype: TypeDouble, IsNull: true}, "null"},
		{Metric{Alias: 8, HasAlias: true, Datatype: TypeUInt16, Value: u32(0)}, "0"},
	}
	payloads := []struct {
		p      Payload
		checks []check
	}{
		{Payload{Timestamp: 1795946400123, HasTimestamp: true, Seq: 0, HasSeq: true}, metrics},
		{Payload{Timestamp: 1795946400124, HasTimestamp: true, Seq: 255, HasSeq: true}, data},
		{Payload{UUID: []byte("u-1")}, data[:1]},
	}
	var enc [][]byte
	for i := range payloads {
		for _, c := range payloads[i].checks {
			payloads[i].p.Metrics = append(payloads[i].p.Metrics, c.m)
		}
		enc = append(enc, AppendPayload(nil, &payloads[i].p))
	}
	decoded, _ := sparkplugjs.Run(t, enc, nil)
	if len(decoded) != len(payloads) {
		t.Fatalf("decoded %d of %d payloads", len(decoded), len(payloads))
	}
	opt := func(has bool, v uint64) string {
		if !has {
			return "<absent>"
		}
		return strconv.FormatUint(v, 10)
	}
	for i, pl := range payloads {
		got, p := decoded[i], pl.p
		if str(got.Timestamp) != opt(p.HasTimestamp, p.Timestamp) || str(got.Seq) != opt(p.HasSeq, p.Seq) || got.UUID != string(p.UUID) {
			t.Errorf("payload %d: timestamp %v seq %v uuid %q, want %+v", i, got.Timestamp, got.Seq, got.UUID, p)
		}
		if len(got.Metrics) != len(pl.checks) {
			t.Fatalf("payload %d: %d metrics, want %d", i, len(got.Metrics), len(pl.checks))
		}
		for j, c := range pl.checks {
			g, m := got.Metrics[j], c.m
			where := fmt.Sprintf("payload %d metric %d (%q)", i, j, m.Name)
			if (g.Name == nil) != (m.Name == nil) || (g.Name != nil && *g.Name != string(m.Name)) {
				t.Errorf("%s: name %v", where, g.Name)
			}
			if g.Type != m.Datatype.String() {
				t.Errorf("%s: sparkplug-payload names datatype %d %q, we %q", where, m.Datatype, g.Type, m.Datatype)
			}
			if str(g.Alias) != opt(m.HasAlias, m.Alias) || str(g.Timestamp) != opt(m.HasTimestamp, m.Timestamp) {
				t.Errorf("%s: alias %v timestamp %v", where, g.Alias, g.Timestamp)
			}
			if flag(g.IsHistorical) != m.IsHistorical || flag(g.IsTransient) != m.IsTransient {
				t.Errorf("%s: isHistorical %v isTransient %v", where, g.IsHistorical, g.IsTransient)
			}
			if v := jsValue(g.Value); c.want != "-" && !sameJS(v, c.want) {
				t.Errorf("%s: value %s, want %s", where, v, c.want)
			}
		}
	}
}

func flag(b *bool) bool { return b != nil && *b }

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// jsValue is a value as sparkplug-payload shows it, as text.
func jsValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case map[string]any:
		if b, ok := v["base64"].(string); ok && len(v) == 1 {
			return "base64:" + b
		}
	}
	return str(v)
}

// sameJS reports whether got is want, or the same number written another
// way (JavaScript and Go print some floats differently).
func sameJS(got, want string) bool {
	if got == want {
		return true
	}
	g, err1 := strconv.ParseFloat(got, 64)
	w, err2 := strconv.ParseFloat(want, 64)
	return err1 == nil && err2 == nil && g == w
}

// TestInterop_WeDecodeTahuPayloads: payloads sparkplug-payload encodes —
// an NBIRTH with a uuid and a body, a birth with every datatype (data sets
// and templates skipped as KindUnsupported), signed and 64-bit extremes,
// the historical and transient flags, aliases up to 1<<40, nulls, and an
// NCMD rebirth — decode to what it was given, each datatype with the
// number sparkplug-payload gives its name, and the NCMD makes the node
// reborn.
func TestInterop_WeDecodeTahuPayloads(t *testing.T) {
	name := func(s string) *string { return &s }
	yes := true
	b64 := func(b []byte) map[string]string {
		return map[string]string{"base64": base64.StdEncoding.EncodeToString(b)}
	}
	type check struct {
		in    sparkplugjs.Metric
		check func(Metric) bool
	}
	checks := []check{
		{sparkplugjs.Metric{Name: name("i8"), Alias: 1, Type: "Int8", Value: -5}, func(m Metric) bool { return m.Value.Int(m.Datatype) == -5 }},
		{sparkplugjs.Metric{Name: name("i8 min"), Alias: 2, Type: "Int8", Value: math.MinInt8}, func(m Metric) bool { return m.Value.Int(m.Datatype) == math.MinInt8 }},
		{sparkplugjs.Metric{Name: name("i16"), Alias: 3, Type: "Int16", Value: -30000}, func(m Metric) bool { return m.Value.Int(m.Datatype) == -30000 }},
		{sparkplugjs.Metric{Name: name("i32"), Alias: 4, Type: "Int32", Value: math.MinInt32}, func(m Metric) bool { return m.Value.Int(m.Datatype) == math.MinInt32 }},
		{sparkplugjs.Metric{Name: name("i64"), Alias: 5, Type: "Int64", Value: "-9223372036854775808"}, func(m Metric) bool { return m.Value.Int(m.Datatype) == math.MinInt64 }},
		{sparkplugjs.Metric{Name: name("i64 max"), Alias: 6, Type: "Int64", Value: "9223372036854775807"}, func(m Metric) bool { return m.Value.Int(m.Datatype) == math.MaxInt64 }},
		{sparkplugjs.Metric{Name: name("u8"), Alias: 7, Type: "UInt8", Value: 255}, func(m Metric) bool { return m.Value.Kind == KindInt && m.Value.Bits == 255 }},
		{sparkplugjs.Metric{Name: name("u16"), Alias: 8, Type: "UInt16", Value: 65535}, func(m Metric) bool { return m.Value.Kind == KindInt && m.Value.Bits == 65535 }},
		// sparkplug-payload 1.0.3 writes UInt32 in long_value (the
		// specification: int_value); the value reads all the same.
		{sparkplugjs.Metric{Name: name("u32"), Alias: 9, Type: "UInt32", Value: math.MaxUint32}, func(m Metric) bool { return m.Value.Bits == math.MaxUint32 }},
		{sparkplugjs.Metric{Name: name("u64"), Alias: 10, Type: "UInt64", Value: "18446744073709551615"}, func(m Metric) bool { return m.Value.Kind == KindLong && m.Value.Bits == math.MaxUint64 }},
		{sparkplugjs.Metric{Name: name("f"), Alias: 11, Type: "Float", Value: 1.5}, func(m Metric) bool { return m.Value.Kind == KindFloat && m.Value.Float64() == 1.5 }},
		{sparkplugjs.Metric{Name: name("d"), Alias: 12, Type: "Double", Value: 21.43, Timestamp: "1795946340000", IsHistorical: &yes}, func(m Metric) bool {
			return m.Value.Kind == KindDouble && m.Value.Float64() == 21.43 && m.IsHistorical && m.HasTimestamp && m.Timestamp == 1795946340000
		}},
		{sparkplugjs.Metric{Name: name("b"), Alias: 13, Type: "Boolean", Value: true, IsTransient: &yes}, func(m Metric) bool { return m.Value.Equal(Bool(true)) && m.IsTransient }},
		{sparkplugjs.Metric{Name: name("s"), Alias: 14, Type: "String", Value: "héllo/wörld"}, func(m Metric) bool { return m.Value.Kind == KindString && string(m.Value.Str) == "héllo/wörld" }},
		{sparkplugjs.Metric{Name: name("t"), Alias: 15, Type: "DateTime", Value: "1795946400000"}, func(m Metric) bool { return m.Value.Equal(Long(1795946400000)) }},
		{sparkplugjs.Metric{Name: name("text"), Alias: 16, Type: "Text", Value: "a\nb"}, func(m Metric) bool { return m.Value.Kind == KindString && string(m.Value.Str) == "a\nb" }},
		{sparkplugjs.Metric{Name: name("uuid"), Alias: 17, Type: "UUID", Value: "123e4567-e89b-12d3-a456-426614174000"}, func(m Metric) bool {
			return string(m.Value.Str) == "123e4567-e89b-12d3-a456-426614174000"
		}},
		{sparkplugjs.Metric{Name: name("bytes"), Alias: 18, Type: "Bytes", Value: b64([]byte{0, 1, 0xFE, 0xFF})}, func(m Metric) bool {
			return m.Value.Kind == KindBytes && string(m.Value.Str) == "\x00\x01\xFE\xFF"
		}},
		{sparkplugjs.Metric{Name: name("file"), Alias: 19, Type: "File", Value: b64([]byte("%PDF"))}, func(m Metric) bool { return m.Value.Kind == KindBytes && string(m.Value.Str) == "%PDF" }},
		{sparkplugjs.Metric{Name: name("dataset"), Alias: 20, Type: "DataSet", Value: map[string]any{
			"numOfColumns": 2, "columns": []string{"a", "b"}, "types": []string{"Int32", "String"}, "rows": [][]any{{1, "x"}, {2, "y"}},
		}}, func(m Metric) bool { return m.Value.Kind == KindUnsupported }},
		{sparkplugjs.Metric{Name: name("template"), Alias: 1 << 40, Type: "Template", Value: map[string]any{
			"isDefinition": true, "metrics": []sparkplugjs.Metric{{Name: name("inner"), Type: "Int32", Value: 3}},
		}}, func(m Metric) bool { return m.Value.Kind == KindUnsupported && m.Alias == 1<<40 }},
		{sparkplugjs.Metric{Name: name("null"), Alias: 21, Type: "Double", Value: nil}, func(m Metric) bool { return m.IsNull && m.Value.Kind == KindNone }},
		{sparkplugjs.Metric{Name: name("s null"), Alias: 22, Type: "String", Value: nil}, func(m Metric) bool { return m.IsNull && m.Value.Kind == KindNone }},
	}
	birth := sparkplugjs.Payload{Timestamp: "1795946400124", Seq: 255}
	for _, c := range checks {
		birth.Metrics = append(birth.Metrics, c.in)
	}
	in := []sparkplugjs.Payload{
		{Timestamp: "1795946400123", Seq: 0, UUID: "u-1", Body: b64([]byte("body")), Metrics: []sparkplugjs.Metric{
			{Name: name("bdSeq"), Type: "UInt64", Value: "17"},
			{Name: name(RebirthMetric), Type: "Boolean", Value: false},
		}},
		birth,
		{Timestamp: "1795946400125", Metrics: []sparkplugjs.Metric{{Name: name(RebirthMetric), Type: "Boolean", Value: true}}},
	}
	_, encoded := sparkplugjs.Run(t, nil, in)
	if len(encoded) != len(in) {
		t.Fatalf("encoded %d of %d", len(encoded), len(in))
	}
	var p Payload
	if err := DecodePayload(encoded[0], &p); err != nil {
		t.Fatal(err)
	}
	if p.Timestamp != 1795946400123 || !p.HasSeq || p.Seq != 0 || string(p.UUID) != "u-1" || !metricOf(t, p, "bdSeq").Value.Equal(Long(17)) ||
		metricOf(t, p, "bdSeq").Datatype != TypeUInt64 || !metricOf(t, p, RebirthMetric).Value.Equal(Bool(false)) {
		t.Fatalf("NBIRTH %+v", p)
	}
	if !strings.Contains(string(encoded[0]), "body") {
		t.Fatalf("sparkplug-payload left the body out: % x", encoded[0])
	}
	if err := DecodePayload(encoded[1], &p); err != nil {
		t.Fatal(err)
	}
	if p.Seq != 255 || len(p.Metrics) != len(checks) {
		t.Fatalf("birth: seq %d, %d metrics", p.Seq, len(p.Metrics))
	}
	for i, c := range checks {
		m := p.Metrics[i]
		if string(m.Name) != *c.in.Name || !m.HasAlias || str(c.in.Alias) != strconv.FormatUint(m.Alias, 10) {
			t.Errorf("metric %d: name %q alias %d, want %q %v", i, m.Name, m.Alias, *c.in.Name, c.in.Alias)
		}
		if m.Datatype.String() != c.in.Type {
			t.Errorf("%s: sparkplug-payload's %s is datatype %d, which we call %s", *c.in.Name, c.in.Type, m.Datatype, m.Datatype)
		}
		if !c.check(m) {
			t.Errorf("%s: %+v (value %s)", *c.in.Name, m, base64.StdEncoding.EncodeToString(m.Value.Str))
		}
	}
	n := newNode(t, "")
	n.Connect(0, 1)
	n.Connected(2)
	acts, err := n.Command(encoded[2], 3)
	if err != nil || len(acts) != 1 || acts[0].Topic != "spBv1.0/plant1/NBIRTH/gw-7" {
		t.Fatalf("Tahu's NCMD rebirth: %v %v", acts, err)
	}
}

func metricOf(t *testing.T, p Payload, name string) Metric {
	t.Helper()
	for _, m := range p.Metrics {
		if string(m.Name) == name {
			return m
		}
	}
	t.Fatalf("no metric %q", name)
	return Metric{}
}

func findMetric(t *testing.T, p sparkplugjs.Payload, name string) sparkplugjs.Metric {
	t.Helper()
	for _, m := range p.Metrics {
		if m.Name != nil && *m.Name == name {
			return m
		}
	}
	t.Fatalf("no metric %q in %+v", name, p)
	return sparkplugjs.Metric{}
}

// sameValue reports whether sparkplug-payload's value is want; it shows
// is_null (a NaN result) as null.
func sameValue(v any, want float64) bool {
	if math.IsNaN(want) {
		return v == nil
	}
	num, ok := v.(json.Number)
	if !ok {
		return false
	}
	f, err := num.Float64()
	return err == nil && f == want
}

// str is a decoded JSON number or decimal string as a string.
func str(v any) string {
	switch v := v.(type) {
	case json.Number:
		return v.String()
	case string:
		return v
	case nil:
		return "<absent>"
	}
	return fmt.Sprint(v)
}

// TestInterop_ReaderReadsTahuSession: a session sparkplug-payload encodes
// — births with aliases, then data by alias only, as Tahu's edge nodes
// send it — reads back by name, and a skipped seq is refused.
func TestInterop_ReaderReadsTahuSession(t *testing.T) {
	name := func(s string) *string { return &s }
	in := []sparkplugjs.Payload{
		{Timestamp: "1000", Seq: 0, Metrics: []sparkplugjs.Metric{
			{Name: name("bdSeq"), Type: "UInt64", Value: "4"},
			{Name: name(RebirthMetric), Type: "Boolean", Value: false},
		}},
		{Timestamp: "1001", Seq: 1, Metrics: []sparkplugjs.Metric{
			{Name: name("Temperature"), Alias: 10, Type: "Float", Value: 20.5},
			{Name: name("Count"), Alias: 11, Type: "Int32", Value: -3},
		}},
		{Timestamp: "1002", Seq: 2, Metrics: []sparkplugjs.Metric{
			{Alias: 10, Type: "Float", Value: 21.25, Timestamp: "990"},
			{Alias: 11, Type: "Int32", Value: 7},
		}},
		{Timestamp: "1003", Seq: 4, Metrics: []sparkplugjs.Metric{{Alias: 10, Type: "Float", Value: 1}}},
	}
	_, enc := sparkplugjs.Run(t, nil, in)
	topics := []string{"spBv1.0/g/NBIRTH/n", "spBv1.0/g/DBIRTH/n/d", "spBv1.0/g/DDATA/n/d", "spBv1.0/g/DDATA/n/d"}
	r := NewReader()
	var got []string
	for i, b := range enc {
		reason, detail := r.Message(topics[i], b, func(rd *Reading) {
			if rd.Device == "d" {
				v := fmt.Sprint(rd.Value.Int(rd.Datatype))
				if rd.Datatype == TypeFloat {
					v = fmt.Sprint(rd.Value.Float64())
				}
				got = append(got, fmt.Sprintf("%s=%s:%s@%d", rd.Name, v, rd.Datatype, rd.Timestamp))
			}
		})
		if i < 3 && reason != "" {
			t.Fatalf("%s: %s %s", topics[i], reason, detail)
		}
		if i == 3 && reason != ReasonSeqGap {
			t.Fatalf("seq 4 after 2: reason %q, want %q", reason, ReasonSeqGap)
		}
	}
	want := "Temperature=20.5:Float@1001 Count=-3:Int32@1001 Temperature=21.25:Float@990 Count=7:Int32@1002"
	if g := strings.Join(got, " "); g != want {
		t.Fatalf("got\n %s\nwant\n %s", g, want)
	}
}
