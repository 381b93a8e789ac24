package decode

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is the deepest nesting of objects and arrays a JSON payload may
// have (the top-level object is depth 1). Deeper input is malformed_json:
// the scanner never recurses or allocates in proportion to the input.
const maxDepth = 64

// String flags reported by scanString.
const (
	strEscaped  = 1 << iota // the string has backslash escapes
	strNonASCII             // the string has bytes ≥ 0x80
)

// Word-at-a-time constants: a byte of ones and a byte of high bits.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// hasZeroByte returns a word whose high bit is set in (at least) the lowest
// zero byte of x, and in no byte below it.
func hasZeroByte(x uint64) uint64 { return (x - lsb) &^ x & msb }

// plainByte[c] is true for string bytes that need no attention: printable
// ASCII other than '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func malformedJSON(what string, off int) error {
	return &Error{Reason: ReasonMalformedJSON, Detail: what + " at offset " + strconv.Itoa(off)}
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func skipSpace(buf []byte, i int) int {
	for i < len(buf) && isSpace(buf[i]) {
		i++
	}
	return i
}

func hexVal(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// hex4 decodes the four hex digits at b[0:4], or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	r := rune(0)
	for _, c := range b[:4] {
		v := hexVal(c)
		if v < 0 {
			return -1
		}
		r = r<<4 | v
	}
	return r
}

// scanString validates the JSON string whose content starts at buf[i] (just
// after the opening quote) and returns the index just after the closing quote
// and its flags. Control characters and invalid escapes are malformed;
// invalid UTF-8 is not (it is replaced when the string is extracted, as
// encoding/json does).
func scanString(buf []byte, i int) (int, uint8, error) {
	var flags uint8
	n := len(buf)
	for i < n {
		// Skip 8 plain bytes at a time; stop at the first one that needs
		// attention (the lowest flagged byte is exact: borrows only move up).
		for i+8 <= n {
			x := binary.LittleEndian.Uint64(buf[i:])
			m := (x-lsb*0x20)&^x | hasZeroByte(x^(lsb*'"')) | hasZeroByte(x^(lsb*'\\')) | x
			if m &= msb; m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= n {
			break
		}
		c := buf[i]
		if plainByte[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			return i + 1, flags, nil
		case c == '\\':
			flags |= strEscaped
			if i+1 >= n {
				return i, 0, malformedJSON("unterminated string", n)
			}
			switch buf[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if hex4(buf[i+2:]) < 0 {
					return i, 0, malformedJSON(`invalid \u escape`, i)
				}
				i += 6
			default:
				return i, 0, malformedJSON("invalid escape", i)
			}
		case c < 0x20:
			return i, 0, malformedJSON("control character in string", i)
		default:
			flags |= strNonASCII
			i++
		}
	}
	return i, 0, malformedJSON("unterminated string", n)
}

// appendString appends the value of the validated string content s (between
// its quotes; flags from scanString) to scratch and returns the value and the
// new scratch. Without escapes or invalid UTF-8 the value aliases s and
// scratch is untouched. Escapes are decoded; \u surrogate pairs are joined;
// a lone surrogate and every byte of invalid UTF-8 become U+FFFD, exactly as
// encoding/json decodes strings.
func appendString(scratch, s []byte, flags uint8) (value, newScratch []byte) {
	if flags&strEscaped == 0 && (flags&strNonASCII == 0 || utf8.Valid(s)) {
		return s, scratch
	}
	mark := len(scratch)
	for i := 0; i < len(s); {
		// Copy the run of bytes that need no decoding in one append.
		j := i
		for j < len(s) && s[j] != '\\' && s[j] < utf8.RuneSelf {
			j++
		}
		scratch = append(scratch, s[i:j]...)
		i = j
		if i >= len(s) {
			break
		}
		if s[i] != '\\' {
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				scratch = utf8.AppendRune(scratch, utf8.RuneError)
			} else {
				scratch = append(scratch, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch c := s[i+1]; c {
		case 'b':
			scratch = append(scratch, '\b')
		case 'f':
			scratch = append(scratch, '\f')
		case 'n':
			scratch = append(scratch, '\n')
		case 'r':
			scratch = append(scratch, '\r')
		case 't':
			scratch = append(scratch, '\t')
		case 'u':
			r := hex4(s[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				next := rune(-1)
				if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
					next = hex4(s[i+2:])
				}
				if pair := utf16.DecodeRune(r, next); pair != utf8.RuneError {
					r = pair
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			scratch = utf8.AppendRune(scratch, r)
			continue
		default: // '"', '\\', '/'
			scratch = append(scratch, c)
		}
		i += 2
	}
	return scratch[mark:len(scratch):len(scratch)], scratch
}

// skipValue validates and skips the JSON value that starts at buf[i] (no
// leading space). depth is the nesting depth the value has if it is an
// object or array. Containers are skipped iteratively: one bit per open level
// records whether it is an object, so the depth limit bounds the state.
func skipValue(buf []byte, i, depth int) (int, error) {
	n := len(buf)
	var objects uint64 // bit k set: open level k is an object
	level := 0         // open containers
	for {
		// A value starts at buf[i].
		if i >= n {
			return i, malformedJSON("unexpected end of input", i)
		}
		closed := false
		switch c := buf[i]; c {
		case '{', '[':
			if depth+level > maxDepth {
				return i, malformedJSON("nesting deeper than "+strconv.Itoa(maxDepth), i)
			}
			isObject := c == '{'
			if isObject {
				objects |= 1 << level
			} else {
				objects &^= 1 << level
			}
			level++
			i = skipSpace(buf, i+1)
			if i < n && (isObject && buf[i] == '}' || !isObject && buf[i] == ']') {
				i++
				level--
				closed = true
				break
			}
			if isObject {
				var err error
				if i, err = skipKey(buf, i); err != nil {
					return i, err
				}
			}
		default:
			var err error
			if i, err = skipScalar(buf, i); err != nil {
				return i, err
			}
			closed = true
		}
		if !closed {
			continue
		}
		// A value ended at buf[i]: close containers until one goes on.
		for {
			if level == 0 {
				return i, nil
			}
			i = skipSpace(buf, i)
			if i >= n {
				return i, malformedJSON("unexpected end of input", i)
			}
			isObject := objects&(1<<(level-1)) != 0
			c := buf[i]
			if c == ',' {
				i = skipSpace(buf, i+1)
				if isObject {
					var err error
					if i, err = skipKey(buf, i); err != nil {
						return i, err
					}
				}
				break
			}
			if isObject && c == '}' || !isObject && c == ']' {
				i++
				level--
				continue
			}
			return i, malformedJSON("expected ',' or closing bracket", i)
		}
	}
}

// skipKey skips `"key" :` and the space after it, starting at buf[i].
func skipKey(buf []byte, i int) (int, error) {
	if i >= len(buf) || buf[i] != '"' {
		return i, malformedJSON("expected object key", i)
	}
	i, _, err := scanString(buf, i+1)
	if err != nil {
		return i, err
	}
	i = skipSpace(buf, i)
	if i >= len(buf) || buf[i] != ':' {
		return i, malformedJSON("expected ':'", i)
	}
	return skipSpace(buf, i+1), nil
}

// skipScalar validates and skips the string, number or literal at buf[i].
func skipScalar(buf []byte, i int) (int, error) {
	switch c := buf[i]; {
	case c == '"':
		end, _, err := scanString(buf, i+1)
		return end, err
	case c == 't':
		return skipLiteral(buf, i, "true")
	case c == 'f':
		return skipLiteral(buf, i, "false")
	case c == 'n':
		return skipLiteral(buf, i, "null")
	case c == '-' || isDigit(c):
		end, ok := scanJSONNumber(buf, i)
		if !ok {
			return end, malformedJSON("invalid number", i)
		}
		return end, nil
	}
	return i, malformedJSON("invalid character "+strconv.QuoteRuneToASCII(rune(buf[i])), i)
}

func skipLiteral(buf []byte, i int, lit string) (int, error) {
	if len(buf)-i < len(lit) || string(buf[i:i+len(lit)]) != lit {
		return i, malformedJSON("invalid literal", i)
	}
	return i + len(lit), nil
}
