package sparkplug

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Kind is which value field of a Metric is set.
type Kind uint8

// The value fields of the specification's Metric message. KindUnsupported is a data
// set, template or extension value, which the codec skips.
const (
	KindNone   Kind = iota // no value (is_null, or a metric without one)
	KindInt                // int_value (uint32): Int8–Int32, UInt8–UInt32
	KindLong               // long_value (uint64): Int64, UInt64, DateTime
	KindFloat              // float_value
	KindDouble             // double_value
	KindBool               // boolean_value
	KindString             // string_value
	KindBytes              // bytes_value
	KindUnsupported
)

// Value is a metric's value. Bits holds integers (signed ones in two's
// complement, as Sparkplug carries them), the IEEE bits of a float or
// double, and 0 or 1 for a boolean; Str holds strings and bytes.
type Value struct {
	Kind Kind
	Bits uint64
	Str  []byte
}

// Double is a double_value.
func Double(f float64) Value { return Value{Kind: KindDouble, Bits: math.Float64bits(f)} }

// Long is a long_value: an Int64 (two's complement), UInt64 or DateTime.
func Long(u uint64) Value { return Value{Kind: KindLong, Bits: u} }

// Bool is a boolean_value.
func Bool(b bool) Value {
	if b {
		return Value{Kind: KindBool, Bits: 1}
	}
	return Value{Kind: KindBool}
}

// Float64 is the value of a KindDouble or KindFloat value.
func (v Value) Float64() float64 {
	if v.Kind == KindFloat {
		return float64(math.Float32frombits(uint32(v.Bits)))
	}
	return math.Float64frombits(v.Bits)
}

// Int is the signed value of an integer of datatype d: Int8–Int32 are
// carried as 32 bits, Int64 as 64, both in two's complement.
func (v Value) Int(d DataType) int64 {
	switch d {
	case TypeInt8:
		return int64(int8(v.Bits))
	case TypeInt16:
		return int64(int16(v.Bits))
	case TypeInt32:
		return int64(int32(v.Bits))
	}
	return int64(v.Bits)
}

// Equal reports whether v and w are the same value (bit for bit: NaN
// equals the same NaN, and -0 differs from 0).
func (v Value) Equal(w Value) bool {
	return v.Kind == w.Kind && v.Bits == w.Bits && string(v.Str) == string(w.Str)
}

// Metric is one metric of a payload. Name is nil where a DATA message
// names the metric by its alias only.
type Metric struct {
	Name                              []byte
	Alias                             uint64
	HasAlias                          bool
	Timestamp                         uint64 // Unix ms; 0 with HasTimestamp false when absent
	HasTimestamp                      bool
	Datatype                          DataType
	IsHistorical, IsTransient, IsNull bool
	Value                             Value
}

// Payload is a Sparkplug B payload. Seq is absent (HasSeq false) only in
// NDEATH, NCMD and DCMD.
type Payload struct {
	Timestamp    uint64
	HasTimestamp bool
	Seq          uint64
	HasSeq       bool
	UUID         []byte
	Metrics      []Metric
}

// Field numbers of the specification's Payload and Payload.Metric messages.
const (
	fPayloadTimestamp = 1
	fPayloadMetrics   = 2
	fPayloadSeq       = 3
	fPayloadUUID      = 4

	fName         = 1
	fAlias        = 2
	fTimestamp    = 3
	fDatatype     = 4
	fIsHistorical = 5
	fIsTransient  = 6
	fIsNull       = 7
	fIntValue     = 10
	fLongValue    = 11
	fFloatValue   = 12
	fDoubleValue  = 13
	fBoolValue    = 14
	fStringValue  = 15
	fBytesValue   = 16
	fDataSetValue = 17
	fTemplate     = 18
	fExtension    = 19
)

// AppendPayload appends p in the protobuf wire format to dst. It does not
// allocate when dst has room. Fields are written in field-number order, as
// protobuf encoders do.
func AppendPayload(dst []byte, p *Payload) []byte {
	if p.HasTimestamp {
		dst = protowire.AppendTag(dst, fPayloadTimestamp, protowire.VarintType)
		dst = protowire.AppendVarint(dst, p.Timestamp)
	}
	for i := range p.Metrics {
		m := &p.Metrics[i]
		dst = protowire.AppendTag(dst, fPayloadMetrics, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(metricSize(m)))
		dst = appendMetric(dst, m)
	}
	if p.HasSeq {
		dst = protowire.AppendTag(dst, fPayloadSeq, protowire.VarintType)
		dst = protowire.AppendVarint(dst, p.Seq)
	}
	if p.UUID != nil {
		dst = protowire.AppendTag(dst, fPayloadUUID, protowire.BytesType)
		dst = protowire.AppendBytes(dst, p.UUID)
	}
	return dst
}

// tagSize is the size of a tag of a field number below 16.
const tagSize = 1

func metricSize(m *Metric) int {
	n := 0
	if m.Name != nil {
		n += tagSize + protowire.SizeBytes(len(m.Name))
	}
	if m.HasAlias {
		n += tagSize + protowire.SizeVarint(m.Alias)
	}
	if m.HasTimestamp {
		n += tagSize + protowire.SizeVarint(m.Timestamp)
	}
	if m.Datatype != TypeUnknown {
		n += tagSize + protowire.SizeVarint(uint64(m.Datatype))
	}
	if m.IsHistorical {
		n += tagSize + 1
	}
	if m.IsTransient {
		n += tagSize + 1
	}
	if m.IsNull {
		n += tagSize + 1
	}
	switch m.Value.Kind {
	case KindInt:
		n += tagSize + protowire.SizeVarint(uint64(uint32(m.Value.Bits)))
	case KindLong:
		n += tagSize + protowire.SizeVarint(m.Value.Bits)
	case KindFloat:
		n += tagSize + 4
	case KindDouble:
		n += tagSize + 8
	case KindBool:
		n += tagSize + 1
	case KindString:
		n += protowire.SizeTag(fStringValue) + protowire.SizeBytes(len(m.Value.Str))
	case KindBytes:
		n += protowire.SizeTag(fBytesValue) + protowire.SizeBytes(len(m.Value.Str))
	}
	return n
}

func appendMetric(dst []byte, m *Metric) []byte {
	if m.Name != nil {
		dst = protowire.AppendTag(dst, fName, protowire.BytesType)
		dst = protowire.AppendBytes(dst, m.Name)
	}
	if m.HasAlias {
		dst = protowire.AppendTag(dst, fAlias, protowire.VarintType)
		dst = protowire.AppendVarint(dst, m.Alias)
	}
	if m.HasTimestamp {
		dst = protowire.AppendTag(dst, fTimestamp, protowire.VarintType)
		dst = protowire.AppendVarint(dst, m.Timestamp)
	}
	// TypeUnknown is never a metric's type: it stands for "left out".
	if m.Datatype != TypeUnknown {
		dst = protowire.AppendTag(dst, fDatatype, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(m.Datatype))
	}
	if m.IsHistorical {
		dst = append(dst, fIsHistorical<<3|byte(protowire.VarintType), 1)
	}
	if m.IsTransient {
		dst = append(dst, fIsTransient<<3|byte(protowire.VarintType), 1)
	}
	if m.IsNull {
		dst = append(dst, fIsNull<<3|byte(protowire.VarintType), 1)
	}
	switch m.Value.Kind {
	case KindInt:
		dst = protowire.AppendTag(dst, fIntValue, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(uint32(m.Value.Bits)))
	case KindLong:
		dst = protowire.AppendTag(dst, fLongValue, protowire.VarintType)
		dst = protowire.AppendVarint(dst, m.Value.Bits)
	case KindFloat:
		dst = protowire.AppendTag(dst, fFloatValue, protowire.Fixed32Type)
		dst = protowire.AppendFixed32(dst, uint32(m.Value.Bits))
	case KindDouble:
		dst = protowire.AppendTag(dst, fDoubleValue, protowire.Fixed64Type)
		dst = protowire.AppendFixed64(dst, m.Value.Bits)
	case KindBool:
		dst = protowire.AppendTag(dst, fBoolValue, protowire.VarintType)
		dst = protowire.AppendVarint(dst, m.Value.Bits&1)
	case KindString:
		dst = protowire.AppendTag(dst, fStringValue, protowire.BytesType)
		dst = protowire.AppendBytes(dst, m.Value.Str)
	case KindBytes:
		dst = protowire.AppendTag(dst, fBytesValue, protowire.BytesType)
		dst = protowire.AppendBytes(dst, m.Value.Str)
	}
	return dst
}

// DecodeError is a payload the decoder cannot read: where, and why.
type DecodeError struct {
	Offset int    // byte offset in the payload
	Metric int    // index of the metric being read, or -1
	Reason string // e.g. "truncated varint"
}

func (e *DecodeError) Error() string {
	s := "sparkplug: bad payload at byte " + strconv.Itoa(e.Offset)
	if e.Metric >= 0 {
		s += " (metric " + strconv.Itoa(e.Metric) + ")"
	}
	return s + ": " + e.Reason
}

// ErrEmpty is returned for an empty payload, which no Sparkplug B message
// is (a legal protobuf encoding of an empty Payload, but a birth, death or
// data message always carries a timestamp or a metric).
var ErrEmpty = errors.New("sparkplug: empty payload")

// DecodePayload decodes b into p, reusing p.Metrics' storage. The names,
// strings and bytes of p alias b. On error p holds what was decoded before
// it.
func DecodePayload(b []byte, p *Payload) error {
	metrics := p.Metrics[:0]
	*p = Payload{}
	defer func() { p.Metrics = metrics }()
	if len(b) == 0 {
		return ErrEmpty
	}
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return wireError(off, -1, n, "tag")
		}
		start := off
		off += n
		switch {
		case num == fPayloadTimestamp && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b[off:])
			if n < 0 {
				return wireError(off, -1, n, "timestamp")
			}
			p.Timestamp, p.HasTimestamp, off = v, true, off+n
		case num == fPayloadSeq && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b[off:])
			if n < 0 {
				return wireError(off, -1, n, "seq")
			}
			p.Seq, p.HasSeq, off = v, true, off+n
		case num == fPayloadUUID && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b[off:])
			if n < 0 {
				return wireError(off, -1, n, "uuid")
			}
			p.UUID, off = v, off+n
		case num == fPayloadMetrics && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b[off:])
			if n < 0 {
				return wireError(off, len(metrics), n, "metric length")
			}
			if len(metrics) < cap(metrics) {
				metrics = metrics[:len(metrics)+1]
			} else {
				metrics = append(metrics, Metric{})
			}
			m := &metrics[len(metrics)-1]
			*m = Metric{}
			if err := decodeMetric(v, m, off+n-len(v), len(metrics)-1); err != nil {
				return err
			}
			off += n
		default:
			n := protowire.ConsumeFieldValue(num, typ, b[off:])
			if n < 0 {
				return wireError(start, -1, n, "field "+strconv.Itoa(int(num)))
			}
			off += n
		}
	}
	return nil
}

func decodeMetric(b []byte, m *Metric, base, index int) error {
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return wireError(base+off, index, n, "tag")
		}
		off += n
		var v uint64
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b[off:])
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b[off:])
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(b[off:])
			v = uint64(v32)
		case protowire.BytesType:
			var bs []byte
			bs, n = protowire.ConsumeBytes(b[off:])
			if n >= 0 {
				switch num {
				case fName:
					m.Name = nonNil(bs)
				case fStringValue:
					m.Value = Value{Kind: KindString, Str: bs}
				case fBytesValue:
					m.Value = Value{Kind: KindBytes, Str: nonNil(bs)}
				case fDataSetValue, fTemplate, fExtension:
					m.Value = Value{Kind: KindUnsupported}
				}
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b[off:])
		}
		if n < 0 {
			return wireError(base+off, index, n, "field "+strconv.Itoa(int(num)))
		}
		off += n
		switch {
		case typ == protowire.VarintType:
			switch num {
			case fAlias:
				m.Alias, m.HasAlias = v, true
			case fTimestamp:
				m.Timestamp, m.HasTimestamp = v, true
			case fDatatype:
				m.Datatype = DataType(uint32(v))
			case fIsHistorical:
				m.IsHistorical = v != 0
			case fIsTransient:
				m.IsTransient = v != 0
			case fIsNull:
				m.IsNull = v != 0
			case fIntValue:
				m.Value = Value{Kind: KindInt, Bits: uint64(uint32(v))}
			case fLongValue:
				m.Value = Value{Kind: KindLong, Bits: v}
			case fBoolValue:
				m.Value = Bool(v != 0)
			}
		case typ == protowire.Fixed32Type && num == fFloatValue:
			m.Value = Value{Kind: KindFloat, Bits: v}
		case typ == protowire.Fixed64Type && num == fDoubleValue:
			m.Value = Value{Kind: KindDouble, Bits: v}
		}
	}
	return nil
}

// nonNil keeps a present but empty name or bytes value apart from an
// absent one.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func wireError(off, metric, n int, what string) error {
	// protowire's messages start "proto:" and then a space or, in some
	// builds, a no-break space (it discourages matching its text); ours
	// start "sparkplug:" already.
	reason := protowire.ParseError(n).Error()
	if r, ok := strings.CutPrefix(reason, "proto:"); ok {
		reason = strings.TrimLeft(r, " \u00a0")
	}
	return &DecodeError{Offset: off, Metric: metric, Reason: what + ": " + reason}
}
