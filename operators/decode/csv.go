package decode

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/eddy-edge/eddy/operators/event"
)

// ErrHeader is returned by a CSV decoder with CSVOptions.Header for the
// header line it consumed. The record holds no reading: the caller drops it
// without dead-lettering it. It is not a *Error.
var ErrHeader = errors.New("decode: csv header line consumed")

// CSVOptions configures NewCSV.
type CSVOptions struct {
	// Header says the first line a decoder sees is a header of column names.
	// It makes the decoder stateful: use one decoder per source (per file or
	// stream), not shared between sources or goroutines. With Columns also
	// set, the header line is checked to be one CSV record and then ignored.
	Header bool
	// Columns names the columns in order; a name is a field path as written
	// in configuration (a.b.c). Required unless Header is set.
	Columns []string
	// Delimiter separates fields; 0 means ','. It may not be '"', '\r' or '\n'.
	Delimiter byte
}

// csvDecoder is stateful only while it waits for a header line.
type csvDecoder struct {
	schema *event.Schema
	delim  byte
	// slots[k] is the schema slot of column k, or -1; nil until a header
	// line defines the columns.
	slots        []int
	awaitsHeader bool
}

// NewCSV returns a Decoder for one CSV record (RFC 4180) per message: one
// line, with an optional trailing "\n" or "\r\n"; quoted fields may hold
// delimiters, "" for a quote, and line breaks. Every record must have exactly
// as many fields as there are columns. An unquoted field that is a decimal
// number (after trimming spaces and tabs; e.g. -12, +3.5, .5, 1e3) becomes a
// Number; an empty unquoted field becomes Null; any other field, and every
// quoted field (quoting is how a CSV writer says "text", e.g. "007"), becomes
// a String aliasing the payload (or rec.Scratch when it holds ""). Columns
// whose path is not in schema are skipped. Malformed input (a bare quote in
// an unquoted field, text after a closing quote, an unterminated quote, more
// than one line, the wrong number of fields, an empty line) is
// *Error{Reason: "malformed_csv"}.
//
// Call it after every path is registered in schema.
func NewCSV(schema *event.Schema, opts CSVOptions) (Decoder, error) {
	d := &csvDecoder{schema: schema, delim: opts.Delimiter, awaitsHeader: opts.Header}
	if d.delim == 0 {
		d.delim = ','
	}
	if d.delim == '"' || d.delim == '\r' || d.delim == '\n' {
		return nil, errors.New("decode: csv delimiter " + strconv.QuoteRune(rune(d.delim)) + " is not allowed")
	}
	if !opts.Header && len(opts.Columns) == 0 {
		return nil, errors.New("decode: csv needs Columns or Header")
	}
	if len(opts.Columns) > 0 {
		seen := make(map[string]bool, len(opts.Columns))
		for _, name := range opts.Columns {
			if name == "" {
				return nil, errors.New("decode: csv column name is empty")
			}
			if seen[name] {
				return nil, errors.New("decode: csv column " + strconv.Quote(name) + " is listed twice")
			}
			seen[name] = true
		}
		d.slots = d.columnSlots(opts.Columns)
	}
	return d, nil
}

func (d *csvDecoder) columnSlots(names []string) []int {
	slots := make([]int, len(names))
	for k, name := range names {
		slots[k] = d.schema.Lookup(event.Path{name}) // Lookup keys by the dotted text
	}
	return slots
}

func malformedCSV(what string, off int) error {
	return &Error{Reason: ReasonMalformedCSV, Detail: what + " at offset " + strconv.Itoa(off)}
}

// Decode implements Decoder.
func (d *csvDecoder) Decode(rec *event.Record) error {
	line := rec.Payload
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
		if n > 1 && line[n-2] == '\r' {
			line = line[:n-2]
		}
	}
	if len(line) == 0 {
		return malformedCSV("empty line", 0)
	}
	if d.awaitsHeader {
		return d.header(rec, line)
	}
	col := 0
	err := d.fields(line, &rec.Scratch, func(text []byte, quoted bool, off int) error {
		if col >= len(d.slots) {
			return malformedCSV("more than "+strconv.Itoa(len(d.slots))+" fields", off)
		}
		if s := d.slots[col]; s >= 0 {
			if quoted {
				rec.Fields[s] = event.StringValue(text)
			} else {
				rec.Fields[s] = textValue(text)
			}
		}
		col++
		return nil
	})
	if err != nil {
		return err
	}
	if col != len(d.slots) {
		return malformedCSV(strconv.Itoa(col)+" fields, want "+strconv.Itoa(len(d.slots)), len(line))
	}
	return nil
}

// header consumes the header line: it defines the columns unless Columns did.
func (d *csvDecoder) header(rec *event.Record, line []byte) error {
	var names []string
	err := d.fields(line, &rec.Scratch, func(text []byte, _ bool, _ int) error {
		names = append(names, string(text))
		return nil
	})
	if err != nil {
		return err
	}
	if d.slots == nil {
		d.slots = d.columnSlots(names)
	}
	d.awaitsHeader = false
	return ErrHeader
}

// fields splits line into fields and passes each to yield with its text
// (unquoted, "" pairs made one quote in scratch), whether it was quoted, and
// its offset. yield does not escape, so a closure costs no allocation.
func (d *csvDecoder) fields(line []byte, scratch *[]byte, yield func(text []byte, quoted bool, off int) error) error {
	n := len(line)
	for i := 0; ; {
		off := i
		var text []byte
		isQuoted := false
		if i < n && line[i] == '"' {
			isQuoted = true
			start := i + 1
			pairs := false // the field holds "" pairs
			j := start
			for {
				q := bytes.IndexByte(line[j:], '"')
				if q < 0 {
					return malformedCSV("unterminated quoted field", i)
				}
				j += q + 1
				if j < n && line[j] == '"' {
					pairs = true
					j++
					continue
				}
				break
			}
			text = line[start : j-1 : j-1]
			if pairs {
				mark := len(*scratch)
				for k := 0; k < len(text); k++ {
					*scratch = append(*scratch, text[k])
					if text[k] == '"' {
						k++ // skip the second quote of the pair
					}
				}
				text = (*scratch)[mark:len(*scratch):len(*scratch)]
			}
			i = j
			if i < n && line[i] != d.delim {
				return malformedCSV("text after a closing quote", i)
			}
		} else {
			end := i + bytes.IndexByte(line[i:], d.delim)
			if end < i {
				end = n
			}
			text = line[i:end:end]
			for k, c := range text {
				switch c {
				case '"':
					return malformedCSV("bare quote in an unquoted field", i+k)
				case '\n', '\r':
					return malformedCSV("more than one line", i+k)
				}
			}
			i = end
		}
		if err := yield(text, isQuoted, off); err != nil {
			return err
		}
		if i >= n {
			return nil
		}
		i++ // the delimiter; a trailing one is followed by an empty field
	}
}

// textValue types an unquoted text field: empty → Null, a decimal number
// (spaces and tabs around it ignored) → Number, else String.
func textValue(text []byte) event.Value {
	if len(text) == 0 {
		return event.Value{Kind: event.Null}
	}
	if num := bytes.Trim(text, " \t"); isDecimal(num) {
		if f, ok := parseFloat(num); ok {
			return event.NumberValue(f)
		}
	}
	return event.StringValue(text)
}
