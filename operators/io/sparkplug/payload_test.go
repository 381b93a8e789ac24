package sparkplug

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

// samplePayloads covers every value kind, flags, absent and present
// optional fields, and values whose varints take 1 to 10 bytes.
func samplePayloads() map[string]Payload {
	return map[string]Payload{
		"nbirth": {Timestamp: 1795946400123, HasTimestamp: true, Seq: 0, HasSeq: true, Metrics: []Metric{
			{Name: []byte("bdSeq"), Datatype: TypeUInt64, Value: Long(255)},
			{Name: []byte(RebirthMetric), Datatype: TypeBoolean, Value: Bool(false)},
		}},
		"ddata aliases": {Timestamp: 1, HasTimestamp: true, Seq: 255, HasSeq: true, Metrics: []Metric{
			{Alias: 1, HasAlias: true, Timestamp: 1795946460000, HasTimestamp: true, Value: Double(21.43)},
			{Alias: 1 << 40, HasAlias: true, IsHistorical: true, Value: Double(math.Copysign(0, -1))},
			{Alias: 3, HasAlias: true, IsNull: true, Datatype: TypeDouble},
		}},
		"every kind": {Metrics: []Metric{
			{Name: []byte("i8"), Datatype: TypeInt8, Value: Value{Kind: KindInt, Bits: uint64(uint32(0xFFFFFFFF))}},
			{Name: []byte("i64"), Datatype: TypeInt64, Value: Long(uint64(math.MaxUint64))},
			{Name: []byte("f"), Datatype: TypeFloat, Value: Value{Kind: KindFloat, Bits: uint64(math.Float32bits(1.5))}},
			{Name: []byte("d"), Datatype: TypeDouble, Value: Double(math.Inf(-1))},
			{Name: []byte("b"), Datatype: TypeBoolean, Value: Bool(true)},
			{Name: []byte("s"), Datatype: TypeString, Value: Value{Kind: KindString, Str: []byte("héllo")}},
			{Name: []byte("empty s"), Datatype: TypeString, Value: Value{Kind: KindString, Str: []byte{}}},
			{Name: []byte("bytes"), Datatype: TypeBytes, Value: Value{Kind: KindBytes, Str: bytes.Repeat([]byte{0, 1}, 100)}},
			{Name: []byte{}, Datatype: TypeDateTime, IsTransient: true, Value: Long(1795946400000)},
			{Name: []byte("no value")},
		}},
		"ndeath no seq": {Timestamp: 7, HasTimestamp: true, Metrics: []Metric{{Name: []byte("bdSeq"), Datatype: TypeUInt64, Value: Long(0)}}},
		"uuid only":     {UUID: []byte("u-1")},
	}
}

// TestPayload_RoundTrip: what AppendPayload writes, DecodePayload reads
// back as the same payload, into a fresh Payload or one that held more
// metrics before; and encoding that again gives the same bytes.
// (Agreement with another implementation is the interop tests' part.)
func TestPayload_RoundTrip(t *testing.T) {
	var reused Payload
	for name, p := range samplePayloads() {
		t.Run(name, func(t *testing.T) {
			b := AppendPayload(nil, &p)
			var back Payload
			if err := DecodePayload(b, &back); err != nil {
				t.Fatal(err)
			}
			if !equalPayload(back, p) {
				t.Fatalf("decoded\n %+v\nwant\n %+v", back, p)
			}
			if again := AppendPayload(nil, &back); !bytes.Equal(again, b) {
				t.Fatalf("re-encoded\n % x\nwas\n % x", again, b)
			}
			reused.Metrics = append(reused.Metrics, Metric{Name: []byte("stale"), IsNull: true}, Metric{Alias: 9, HasAlias: true})
			if err := DecodePayload(b, &reused); err != nil || !equalPayload(reused, p) {
				t.Fatalf("decoded into a used Payload: %v\n %+v\nwant\n %+v", err, reused, p)
			}
		})
	}
}

// goldenPayloads are messages with their encodings worked out by hand from
// the protobuf wire rules: a tag is field<<3|wire type (0 varint, 1
// fixed64, 2 length-delimited, 5 fixed32), varints are little-endian 7-bit
// groups with the high bit set on all but the last, fixed values are
// little-endian; the field numbers are the specification's.
var goldenPayloads = []struct {
	name string
	p    Payload
	wire []byte
}{
	{"NDEATH", Payload{Timestamp: 300, HasTimestamp: true, Metrics: []Metric{
		{Name: []byte("bdSeq"), Datatype: TypeUInt64, Value: Long(5)},
	}}, []byte{
		0x08, 0xAC, 0x02, // timestamp (1, varint) 300 = 0b10_0101100
		0x12, 0x0B, // metrics (2, bytes), 11 bytes
		0x0A, 0x05, 'b', 'd', 'S', 'e', 'q', // name (1, bytes)
		0x20, 0x08, // datatype (4, varint) UInt64
		0x58, 0x05, // long_value (11, varint) 5
	}},
	{"DDATA by alias", Payload{Timestamp: 1, HasTimestamp: true, Seq: 255, HasSeq: true, Metrics: []Metric{
		{Alias: 1, HasAlias: true, Timestamp: 2, HasTimestamp: true, Datatype: TypeDouble, IsHistorical: true, Value: Double(1)},
		{Alias: 2, HasAlias: true, Datatype: TypeDouble, IsNull: true},
		{Alias: 1 << 40, HasAlias: true},
	}}, []byte{
		0x08, 0x01, // timestamp 1
		0x12, 0x11, // metric, 17 bytes
		0x10, 0x01, // alias (2, varint) 1
		0x18, 0x02, // timestamp (3, varint) 2
		0x20, 0x0A, // datatype Double
		0x28, 0x01, // is_historical (5, varint) true
		0x69, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, // double_value (13, fixed64) 1.0 = 0x3FF0000000000000
		0x12, 0x06, // metric, 6 bytes
		0x10, 0x02, // alias 2
		0x20, 0x0A, // datatype Double
		0x38, 0x01, // is_null (7, varint) true, and no value
		0x12, 0x07, // metric, 7 bytes
		0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, // alias 1<<40: five zero groups, then 1<<5
		0x18, 0xFF, 0x01, // seq (3, varint) 255
	}},
	{"values and uuid", Payload{UUID: []byte("u1"), Metrics: []Metric{
		{Name: []byte("t"), Datatype: TypeInt8, IsTransient: true, Value: Value{Kind: KindInt, Bits: 0xFFFFFFFF}},
		{Name: []byte("f"), Datatype: TypeFloat, Value: Value{Kind: KindFloat, Bits: uint64(math.Float32bits(1.5))}},
		{Name: []byte("s"), Datatype: TypeString, Value: Value{Kind: KindString, Str: []byte("hé")}},
		{Name: []byte("b"), Datatype: TypeBytes, Value: Value{Kind: KindBytes, Str: []byte{0x00, 0xFF}}},
		{Name: []byte("ok"), Datatype: TypeBoolean, Value: Bool(true)},
		{Name: []byte("i64"), Datatype: TypeInt64, Value: Long(math.MaxUint64)},
	}}, []byte{
		0x12, 0x0D, // metric, 13 bytes
		0x0A, 0x01, 't',
		0x20, 0x01, // datatype Int8
		0x30, 0x01, // is_transient (6, varint) true
		0x50, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, // int_value (10, varint) -1 as uint32: 32 one bits
		0x12, 0x0A, // metric, 10 bytes
		0x0A, 0x01, 'f',
		0x20, 0x09, // datatype Float
		0x65, 0x00, 0x00, 0xC0, 0x3F, // float_value (12, fixed32) 1.5 = 0x3FC00000
		0x12, 0x0A, // metric, 10 bytes
		0x0A, 0x01, 's',
		0x20, 0x0C, // datatype String
		0x7A, 0x03, 'h', 0xC3, 0xA9, // string_value (15, bytes) "hé" in UTF-8
		0x12, 0x0A, // metric, 10 bytes
		0x0A, 0x01, 'b',
		0x20, 0x11, // datatype Bytes (17)
		0x82, 0x01, 0x02, 0x00, 0xFF, // bytes_value (16, bytes): the tag 130 takes two bytes
		0x12, 0x08, // metric, 8 bytes
		0x0A, 0x02, 'o', 'k',
		0x20, 0x0B, // datatype Boolean
		0x70, 0x01, // boolean_value (14, varint) true
		0x12, 0x12, // metric, 18 bytes
		0x0A, 0x03, 'i', '6', '4',
		0x20, 0x04, // datatype Int64
		0x58, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, // long_value -1: 64 one bits, ten bytes
		0x22, 0x02, 'u', '1', // uuid (4, bytes)
	}},
}

// TestPayload_Golden: AppendPayload writes the hand-worked bytes, and
// DecodePayload reads them as the payload.
func TestPayload_Golden(t *testing.T) {
	for _, g := range goldenPayloads {
		t.Run(g.name, func(t *testing.T) {
			if got := AppendPayload(nil, &g.p); !bytes.Equal(got, g.wire) {
				t.Errorf("encoded\n % x\nwant\n % x", got, g.wire)
			}
			var p Payload
			if err := DecodePayload(g.wire, &p); err != nil {
				t.Fatal(err)
			}
			if !equalPayload(p, g.p) {
				t.Fatalf("decoded\n %+v\nwant\n %+v", p, g.p)
			}
		})
	}
	if got := goldenPayloads[2].p.Metrics[0].Value.Int(TypeInt8); got != -1 {
		t.Errorf("Int8 0xFFFFFFFF reads as %d, want -1", got)
	}
}

func TestPayload_DecodeErrors(t *testing.T) {
	good := AppendPayload(nil, &Payload{Timestamp: 300, HasTimestamp: true, Seq: 1, HasSeq: true,
		Metrics: []Metric{{Name: []byte("a"), Datatype: TypeDouble, Value: Double(1)}}})
	for _, c := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "empty payload"},
		{"truncated varint", []byte{0x08, 0x80}, "byte 1: timestamp: unexpected EOF"},
		{"metric longer than payload", []byte{0x12, 0x05, 0x0a}, "byte 1 (metric 0): metric length: unexpected EOF"},
		{"truncated inside metric", []byte{0x12, 0x02, 0x69, 0x00}, "(metric 0): field 13: unexpected EOF"},
		{"field number 0", []byte{0x00}, "byte 0: tag: invalid field number"},
		{"end group", []byte{0x0c}, "field 1: mismatching end group marker"},
		{"cut", good[:len(good)-1], "byte"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var p Payload
			err := DecodePayload(c.in, &p)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "sparkplug: ") {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
			var de *DecodeError
			if c.name != "empty" && !errors.As(err, &de) {
				t.Fatalf("err %T is not a *DecodeError", err)
			}
		})
	}
}

// TestPayload_UnknownAndMistypedFieldsSkipped: as protobuf decoders do, a
// field the schema does not have, or a known one with another wire type,
// is skipped; nested templates and data sets decode as KindUnsupported.
func TestPayload_UnknownAndMistypedFieldsSkipped(t *testing.T) {
	b := []byte{
		0x18, 0x04, // seq 4
		0x12, 0x1C, // metric, 28 bytes
		0x0A, 0x02, 'd', 's', // name "ds"
		0x20, 0x10, // datatype DataSet (16)
		0x4A, 0x03, 0x0A, 0x01, 'k', // properties (9, bytes): a PropertySet with keys ["k"]
		0x8A, 0x01, 0x05, 0x08, 0x01, 0x12, 0x01, 'c', // dataset_value (17, bytes): num_of_columns 1, columns ["c"]
		0x11, 1, 2, 3, 4, 5, 6, 7, 8, // alias (2) as fixed64: mistyped
		0x2A, 0x07, 'i', 'g', 'n', 'o', 'r', 'e', 'd', // body (5, bytes)
		0xF8, 0x07, 0x01, // field 127 (127<<3 = 0x3F8), varint: unknown
		0x1D, 1, 2, 3, 4, // seq (3) as fixed32: mistyped
	}
	var p Payload
	if err := DecodePayload(b, &p); err != nil {
		t.Fatal(err)
	}
	m := p.Metrics
	if !p.HasSeq || p.Seq != 4 || len(m) != 1 || m[0].Value.Kind != KindUnsupported || string(m[0].Name) != "ds" || m[0].HasAlias || m[0].Datatype != TypeDataSet {
		t.Fatalf("got %+v", p)
	}
}

// TestDataTypeOf: each field type maps to a datatype with a value field.
// (The datatypes' numbers and names are held against sparkplug-payload's
// by the interop tests, in both directions.)
func TestDataTypeOf(t *testing.T) {
	for _, c := range []struct {
		f    FieldType
		want DataType
	}{{FieldNumber, TypeDouble}, {FieldInteger, TypeInt64}, {FieldBool, TypeBoolean}, {FieldString, TypeString}, {FieldTime, TypeDateTime}, {FieldBytes, TypeBytes}} {
		if got := DataTypeOf(c.f); got != c.want {
			t.Errorf("DataTypeOf(%d) = %s, want %s", c.f, got, c.want)
		}
		if valueKindOf(c.want) == KindUnsupported {
			t.Errorf("%s has no value field", c.want)
		}
	}
	if got := DataType(20).String(); got != "DataType(20)" {
		t.Errorf("DataType(20) is %q", got)
	}
}

func equalPayload(a, b Payload) bool {
	if a.Timestamp != b.Timestamp || a.HasTimestamp != b.HasTimestamp || a.Seq != b.Seq || a.HasSeq != b.HasSeq ||
		!bytes.Equal(a.UUID, b.UUID) || (a.UUID == nil) != (b.UUID == nil) || len(a.Metrics) != len(b.Metrics) {
		return false
	}
	for i := range a.Metrics {
		x, y := a.Metrics[i], b.Metrics[i]
		if !bytes.Equal(x.Name, y.Name) || (x.Name == nil) != (y.Name == nil) || !bytes.Equal(x.Value.Str, y.Value.Str) {
			return false
		}
		if x.Alias != y.Alias || x.HasAlias != y.HasAlias || x.Timestamp != y.Timestamp || x.HasTimestamp != y.HasTimestamp ||
			x.Datatype != y.Datatype || x.IsHistorical != y.IsHistorical || x.IsTransient != y.IsTransient || x.IsNull != y.IsNull ||
			x.Value.Kind != y.Value.Kind || x.Value.Bits != y.Value.Bits {
			return false
		}
	}
	return true
}
