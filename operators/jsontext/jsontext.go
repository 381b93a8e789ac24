// Package jsontext writes the JSON text of strings and numbers, the one way
// Eddy writes them everywhere: in output records and dead letters (package
// sink) and in the control state's canonical form, which checkpoints store
// (package control).
//
// Strings: '"' and '\\' are escaped, control characters below 0x20 use their
// short form (\n, \r, \t, \b, \f) or \u00XX, each byte that is not part of
// valid UTF-8 becomes \ufffd (one per byte, as encoding/json does), so the
// text is always valid JSON, and U+2028/U+2029 are escaped so it is also
// safe inside JavaScript. Everything else is copied as is.
//
// Numbers: the shortest text that parses back to exactly the value, in
// plain decimals for magnitudes in [1e-6, 1e21) and exponent notation
// outside ("1e+21", "1e-7"), as encoding/json and JavaScript write them;
// NaN and ±Inf, which JSON cannot hold, are written as null.
//
// Every function appends to a caller-owned buffer and allocates nothing
// beyond growing it.
package jsontext

import (
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

const hexDigits = "0123456789abcdef"

// AppendEscaped appends s as the inside of a JSON string (no quotes).
func AppendEscaped(dst []byte, s string) []byte {
	start := 0 // s[start:i] is pending verbatim output
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(dst, s[start:]...)
}

// AppendEscapedBytes is AppendEscaped for a byte slice.
func AppendEscapedBytes(dst []byte, b []byte) []byte {
	// A view, not a copy: AppendEscaped only reads it during the call.
	return AppendEscaped(dst, unsafe.String(unsafe.SliceData(b), len(b)))
}

// AppendString appends s as a complete JSON string, quotes included.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = AppendEscaped(dst, s)
	return append(dst, '"')
}

// AppendStringBytes is AppendString for a byte slice.
func AppendStringBytes(dst []byte, b []byte) []byte {
	dst = append(dst, '"')
	dst = AppendEscapedBytes(dst, b)
	return append(dst, '"')
}

// AppendNumber appends v as a JSON number, or null when v is NaN or ±Inf.
func AppendNumber(dst []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(dst, "null"...)
	}
	format := byte('f')
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, v, format, -1, 64)
	if format == 'e' {
		// Go writes e-07; JSON writers (and JavaScript) write e-7.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}
