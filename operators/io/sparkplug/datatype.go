package sparkplug

import "strconv"

// DataType is a metric's Sparkplug datatype, numbered as the
// specification's DataType enum (the interop tests hold the numbers and
// names against sparkplug-payload's).
type DataType uint32

// The scalar datatypes; the array, data set, template and property types
// decode as their numbers.
const (
	TypeUnknown  DataType = 0
	TypeInt8     DataType = 1
	TypeInt16    DataType = 2
	TypeInt32    DataType = 3
	TypeInt64    DataType = 4
	TypeUInt8    DataType = 5
	TypeUInt16   DataType = 6
	TypeUInt32   DataType = 7
	TypeUInt64   DataType = 8
	TypeFloat    DataType = 9
	TypeDouble   DataType = 10
	TypeBoolean  DataType = 11
	TypeString   DataType = 12
	TypeDateTime DataType = 13
	TypeText     DataType = 14
	TypeUUID     DataType = 15
	TypeDataSet  DataType = 16
	TypeBytes    DataType = 17
	TypeFile     DataType = 18
	TypeTemplate DataType = 19
)

var dataTypeNames = [...]string{"Unknown", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
	"Float", "Double", "Boolean", "String", "DateTime", "Text", "UUID", "DataSet", "Bytes", "File", "Template"}

func (d DataType) String() string {
	if int(d) < len(dataTypeNames) {
		return dataTypeNames[d]
	}
	return "DataType(" + strconv.FormatUint(uint64(d), 10) + ")"
}

// FieldType is the type of a field the agent emits, as far as Sparkplug
// needs to know it.
type FieldType uint8

// The field types: window aggregates are numbers (float64); readings also
// carry strings and booleans; timestamps are Unix milliseconds.
const (
	FieldNumber FieldType = iota
	FieldInteger
	FieldBool
	FieldString
	FieldTime
	FieldBytes
)

// DataTypeOf is the Sparkplug datatype a field of type f is published as.
// Numbers are Double (an aggregate such as avg is fractional, and a
// float64 holds every value the agent computes exactly); integers are
// Int64; times are DateTime (Unix ms, as Sparkplug defines it).
func DataTypeOf(f FieldType) DataType {
	switch f {
	case FieldInteger:
		return TypeInt64
	case FieldBool:
		return TypeBoolean
	case FieldString:
		return TypeString
	case FieldTime:
		return TypeDateTime
	case FieldBytes:
		return TypeBytes
	}
	return TypeDouble
}

// valueKindOf is the Metric value field a datatype is carried in.
func valueKindOf(d DataType) Kind {
	switch d {
	case TypeInt8, TypeInt16, TypeInt32, TypeUInt8, TypeUInt16, TypeUInt32:
		return KindInt
	case TypeInt64, TypeUInt64, TypeDateTime:
		return KindLong
	case TypeFloat:
		return KindFloat
	case TypeDouble:
		return KindDouble
	case TypeBoolean:
		return KindBool
	case TypeString, TypeText, TypeUUID:
		return KindString
	case TypeBytes, TypeFile:
		return KindBytes
	}
	return KindUnsupported
}
