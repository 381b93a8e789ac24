package decode

import (
	"math"
	"strconv"
)

// exactPow10 holds the powers of ten that float64 represents exactly.
var exactPow10 = [...]float64{
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// scanJSONNumber returns the end of the JSON number (RFC 8259 grammar:
// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?) that starts at buf[i], and
// whether one starts there.
func scanJSONNumber(buf []byte, i int) (int, bool) {
	n := len(buf)
	if buf[i] == '-' {
		i++
	}
	switch {
	case i >= n:
		return i, false
	case buf[i] == '0':
		i++
	case buf[i] >= '1' && buf[i] <= '9':
		i++
		for i < n && isDigit(buf[i]) {
			i++
		}
	default:
		return i, false
	}
	if i < n && buf[i] == '.' {
		i++
		start := i
		for i < n && isDigit(buf[i]) {
			i++
		}
		if i == start {
			return i, false
		}
	}
	if i < n && (buf[i] == 'e' || buf[i] == 'E') {
		i++
		if i < n && (buf[i] == '+' || buf[i] == '-') {
			i++
		}
		start := i
		for i < n && isDigit(buf[i]) {
			i++
		}
		if i == start {
			return i, false
		}
	}
	return i, true
}

// isDecimal reports whether b is a decimal number in the lenient text grammar
// used for CSV fields, raw payloads and timestamp strings:
// [+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?
// It is the JSON grammar plus a leading '+', leading zeros and a bare '.'
// side; it excludes what strconv.ParseFloat also takes (Inf, NaN, hex,
// underscores), which are no sensor's numbers.
func isDecimal(b []byte) bool {
	n := len(b)
	i := 0
	if i < n && (b[i] == '+' || b[i] == '-') {
		i++
	}
	digits := 0
	for i < n && isDigit(b[i]) {
		i++
		digits++
	}
	if i < n && b[i] == '.' {
		i++
		for i < n && isDigit(b[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < n && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < n && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		for i < n && isDigit(b[i]) {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == n
}

// parseFloat converts b, which must satisfy isDecimal (so also any JSON
// number), to the nearest float64. It reports false when the value is beyond
// the float64 range (it would be ±Inf); values too small to represent become
// ±0, as with strconv.ParseFloat.
//
// Short numbers (at most 19 significant digits, a small decimal exponent) are
// converted exactly without strconv: a float64 mantissa below 2^53 times or
// divided by an exact power of ten is correctly rounded (Clinger's fast path).
// Others go through strconv.ParseFloat on a string that does not escape, which
// the compiler builds on the stack when it is at most 32 bytes; longer
// numbers are first shortened (parseFloatLong), so nothing allocates except
// for a number beyond 19 significant digits lying so close to a rounding
// boundary that those digits cannot decide it.
func parseFloat(b []byte) (float64, bool) {
	if f, ok := parseFloatFast(b); ok {
		return f, true
	}
	if len(b) > 32 {
		return parseFloatLong(b)
	}
	return parseFloatStrconv(b)
}

func parseFloatStrconv(b []byte) (float64, bool) {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		// The syntax is checked before, so this is a range error (overflow;
		// strconv does not report underflow).
		return 0, false
	}
	return f, true
}

// parseFloatLong converts a long decimal by keeping its first 19 significant
// digits d and its decimal exponent e: the exact value lies in
// [d×10^e, (d+1)×10^e), so when both ends round to the same float64 that is
// the answer. Only when they differ is the full text parsed.
func parseFloatLong(b []byte) (float64, bool) {
	const maxDigits = 19
	n := len(b)
	i := 0
	neg := false
	if i < n && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	var mant uint64
	digits, exp10 := 0, 0
	truncated := false
	for ; i < n && isDigit(b[i]); i++ {
		switch {
		case digits < maxDigits:
			mant = mant*10 + uint64(b[i]-'0')
			if mant != 0 {
				digits++
			}
		default:
			exp10++
			truncated = truncated || b[i] != '0'
		}
	}
	if i < n && b[i] == '.' {
		for i++; i < n && isDigit(b[i]); i++ {
			if digits < maxDigits {
				mant = mant*10 + uint64(b[i]-'0')
				exp10--
				if mant != 0 {
					digits++
				}
			} else {
				truncated = truncated || b[i] != '0'
			}
		}
	}
	if i < n && (b[i] == 'e' || b[i] == 'E') {
		i++
		expNeg := false
		if i < n && (b[i] == '+' || b[i] == '-') {
			expNeg = b[i] == '-'
			i++
		}
		exp := 0
		for ; i < n && isDigit(b[i]); i++ {
			if exp < 1_000_000 { // saturate: far beyond any float64 exponent
				exp = exp*10 + int(b[i]-'0')
			}
		}
		if expNeg {
			exp = -exp
		}
		exp10 += exp
	}
	lo, ok := parseDecimalParts(neg, mant, exp10)
	if !truncated {
		return lo, ok
	}
	hi, okHi := parseDecimalParts(neg, mant+1, exp10)
	if ok == okHi && math.Float64bits(lo) == math.Float64bits(hi) {
		return lo, ok
	}
	return parseFloatStrconv(b)
}

// parseDecimalParts returns ±mant×10^exp10 correctly rounded; its text is at
// most 1+20+1+8 bytes, so strconv gets a stack string.
func parseDecimalParts(neg bool, mant uint64, exp10 int) (float64, bool) {
	var buf [32]byte
	t := buf[:0]
	if neg {
		t = append(t, '-')
	}
	t = strconv.AppendUint(t, mant, 10)
	t = append(t, 'e')
	t = strconv.AppendInt(t, int64(exp10), 10)
	return parseFloatStrconv(t)
}

func parseFloatFast(b []byte) (float64, bool) {
	n := len(b)
	i := 0
	neg := false
	if i < n && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	var mant uint64
	digits, frac := 0, 0
	for i < n && isDigit(b[i]) {
		if mant != 0 || b[i] != '0' {
			digits++
		}
		mant = mant*10 + uint64(b[i]-'0')
		i++
	}
	if i < n && b[i] == '.' {
		i++
		for i < n && isDigit(b[i]) {
			if mant != 0 || b[i] != '0' {
				digits++
			}
			mant = mant*10 + uint64(b[i]-'0')
			frac++
			i++
		}
	}
	if digits > 19 {
		return 0, false
	}
	exp := 0
	if i < n && (b[i] == 'e' || b[i] == 'E') {
		i++
		expNeg := false
		if i < n && (b[i] == '+' || b[i] == '-') {
			expNeg = b[i] == '-'
			i++
		}
		for i < n && isDigit(b[i]) {
			if exp > 1000 {
				return 0, false
			}
			exp = exp*10 + int(b[i]-'0')
			i++
		}
		if expNeg {
			exp = -exp
		}
	}
	if mant > 1<<53 {
		return 0, false
	}
	f := float64(mant)
	switch e10 := exp - frac; {
	case mant == 0:
		f = 0
	case e10 == 0:
	case e10 > 0 && e10 < len(exactPow10):
		f *= exactPow10[e10]
	case e10 < 0 && -e10 < len(exactPow10):
		f /= exactPow10[-e10]
	default:
		return 0, false
	}
	if neg {
		f = math.Copysign(f, -1)
	}
	return f, true
}

// parseJSONNumber scans the JSON number at buf[i] (as scanJSONNumber) and
// converts it (as parseFloat) in the same pass for the common short forms.
// It returns the end, the value, whether the syntax is valid, and whether the
// value is within the float64 range.
func parseJSONNumber(buf []byte, i int) (end int, f float64, valid, inRange bool) {
	n := len(buf)
	start := i
	neg := false
	if buf[i] == '-' {
		neg = true
		i++
	}
	var mant uint64
	digits := 0
	switch {
	case i >= n:
		return i, 0, false, false
	case buf[i] == '0':
		i++
	case buf[i] >= '1' && buf[i] <= '9':
		for i < n && isDigit(buf[i]) {
			mant = mant*10 + uint64(buf[i]-'0')
			digits++
			i++
		}
	default:
		return i, 0, false, false
	}
	frac := 0
	if i < n && buf[i] == '.' {
		i++
		fracStart := i
		for i < n && isDigit(buf[i]) {
			mant = mant*10 + uint64(buf[i]-'0')
			if mant != 0 {
				digits++
			}
			i++
		}
		if frac = i - fracStart; frac == 0 {
			return i, 0, false, false
		}
	}
	if i < n && (buf[i] == 'e' || buf[i] == 'E') {
		// Rare in sensor data: validate, then convert the general way.
		end, ok := scanJSONNumber(buf, start)
		if !ok {
			return end, 0, false, false
		}
		f, ok := parseFloat(buf[start:end])
		return end, f, true, ok
	}
	if digits > 15 || frac >= len(exactPow10) {
		// The mantissa may have wrapped or passed 2^53: convert the general way.
		f, ok := parseFloat(buf[start:i])
		return i, f, true, ok
	}
	f = float64(mant)
	if frac > 0 {
		f /= exactPow10[frac]
	}
	if neg {
		f = -f
	}
	return i, f, true, true
}
