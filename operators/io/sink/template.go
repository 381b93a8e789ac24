package sink

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/eddy-edge/eddy/operators/record"
)

// TopicVariables are the variables a topic template may use.
var TopicVariables = []string{"device_id", "pipeline", "key", "window_start", "window_end"}

type variable uint8

const (
	varInvalid variable = iota
	varDeviceID
	varPipeline
	varKey
	varWindowStart
	varWindowEnd
)

func lookupVariable(name string) variable {
	switch name {
	case "device_id":
		return varDeviceID
	case "pipeline":
		return varPipeline
	case "key":
		return varKey
	case "window_start":
		return varWindowStart
	case "window_end":
		return varWindowEnd
	}
	return varInvalid
}

// templatePart is a literal followed by an optional variable.
type templatePart struct {
	literal string
	v       variable // varInvalid: no variable
}

// Template is a compiled string with ${name} variables, such as the topic
// "sites/${device_id}/${pipeline}/${key}". Compile it once with
// ParseTemplate; Append is safe for concurrent use and does not allocate.
type Template struct {
	source string
	parts  []templatePart
}

// ParseTemplate compiles s. Variables are written ${name}; allowed lists the
// names s may use (nil allows all of TopicVariables), so a context that has
// no window, such as an S3 prefix, can allow only "device_id". "$$" stands
// for a literal "$"; any other "$" not followed by "{" is literal too. The
// error names the offending variable or the unterminated "${".
func ParseTemplate(s string, allowed []string) (*Template, error) {
	if allowed == nil {
		allowed = TopicVariables
	}
	for _, name := range allowed {
		if lookupVariable(name) == varInvalid {
			return nil, fmt.Errorf("sink: template variable %q is not supported (supported: %s)", name, strings.Join(TopicVariables, ", "))
		}
	}
	t := &Template{source: s}
	var literal strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '$' {
			literal.WriteByte(s[i])
			i++
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "$$"):
			literal.WriteByte('$')
			i += 2
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return nil, fmt.Errorf("sink: template %q: unterminated \"${\" at offset %d", s, i)
			}
			name := s[i+2 : i+2+end]
			if !slices.Contains(allowed, name) {
				return nil, fmt.Errorf("sink: template %q: unknown variable ${%s} (allowed: %s)", s, name, strings.Join(allowed, ", "))
			}
			t.parts = append(t.parts, templatePart{literal: literal.String(), v: lookupVariable(name)})
			literal.Reset()
			i += 2 + end + 1
		default:
			literal.WriteByte('$')
			i++
		}
	}
	if literal.Len() > 0 || len(t.parts) == 0 {
		t.parts = append(t.parts, templatePart{literal: literal.String()})
	}
	return t, nil
}

// String returns the template's source text.
func (t *Template) String() string { return t.source }

// Append renders the template for deviceID and r onto dst. window_start and
// window_end render as Unix milliseconds. Each substituted value is made
// one path segment that is a valid MQTT topic level: '/', '+', '#', NUL and
// bytes that are not valid UTF-8 become '_'. Literal text is copied as is.
// r may be nil (an item that is not a firing): then pipeline, key and the
// window bounds render empty.
func (t *Template) Append(dst []byte, deviceID string, r *record.Result) []byte {
	for _, p := range t.parts {
		dst = append(dst, p.literal...)
		switch p.v {
		case varDeviceID:
			dst = appendSegment(dst, deviceID)
		case varPipeline:
			if r != nil {
				dst = appendSegment(dst, r.Pipeline)
			}
		case varKey:
			if r != nil {
				dst = appendSegmentBytes(dst, r.Key)
			}
		case varWindowStart:
			if r != nil {
				dst = strconv.AppendInt(dst, r.Start, 10)
			}
		case varWindowEnd:
			if r != nil {
				dst = strconv.AppendInt(dst, r.End, 10)
			}
		}
	}
	return dst
}

// appendSegment appends s with the characters that would change a topic's
// structure ('/', '+', '#'), NUL and invalid UTF-8 replaced by '_'.
func appendSegment(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c == '/' || c == '+' || c == '#' || c == 0 {
				c = '_'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, '_')
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst
}

func appendSegmentBytes(dst []byte, b []byte) []byte {
	return appendSegment(dst, bytesView(b))
}

// bytesView returns b as a string without copying. The caller must only read
// the string during its call and never keep it, as b may change afterwards.
func bytesView(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
