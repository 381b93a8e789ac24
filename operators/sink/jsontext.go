package sink

import (
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

const hexDigits = "0123456789abcdef"

// appendEscaped appends s as the inside of a JSON string (no quotes).
//
// '"' and '\\' are escaped, control characters below 0x20 use their short form
// (\n, \r, \t, \b, \f) or \u00XX, each byte that is not part of valid UTF-8
// becomes \ufffd (one per byte, as encoding/json does), and U+2028/U+2029 are
// escaped so the output is also safe inside JavaScript. Everything else is
// copied as is. It never allocates beyond growing dst.
func appendEscaped(dst []byte, s string) []byte {
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

// appendEscapedBytes is appendEscaped for a byte slice.
func appendEscapedBytes(dst []byte, b []byte) []byte {
	return appendEscaped(dst, bytesView(b))
}

// bytesView returns b as a string without copying. The caller must only read
// the string during its call and never keep it, as b may change afterwards.
func bytesView(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// appendQuoted appends s as a complete JSON string, quotes included.
func appendQuoted(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// appendNumber appends v as a JSON number, or null when v is NaN or ±Inf
// (JSON has no literal for them). The text is the shortest that parses back
// to exactly v; like encoding/json it uses plain decimals for magnitudes in
// [1e-6, 1e21) and exponent notation outside, with "e-7" rather than "e-07".
func appendNumber(dst []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(dst, "null"...)
	}
	format := byte('f')
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, v, format, -1, 64)
	if format == 'e' {
		// Shorten a two-digit negative exponent with a leading zero: e-07 → e-7.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}
