// Package decode turns message payloads into Record slots and extracts event
// time, allocating nothing per message in steady state.
//
// # Model
//
// A pipeline registers the field paths it reads in an event.Schema; a
// Decoder built from that schema (after every path is registered) fills
// exactly those slots and skips the rest of the message. The caller owns the
// Record: Reset it to schema.Len() slots, put the message in rec.Payload,
// call Decode, then Timestamp.Extract. String values alias rec.Payload, or
// rec.Scratch when decoding had to rewrite bytes (JSON escapes, CSV ""), so
// they live exactly as long as the Record's current reading.
//
// # Formats
//
//   - JSON (NewJSON): one object per message. A single pass over the bytes
//     validates everything (RFC 8259 grammar, escapes, no raw control
//     characters, nesting at most 64) and descends only into the objects on a
//     registered path, found through a trie of the schema's paths. Numbers
//     become float64, strings are unescaped (invalid UTF-8 and lone surrogates
//     become U+FFFD, as in encoding/json), true/false Bool, null Null, and an
//     object or array at a registered path a String of its raw JSON text.
//     Duplicate keys: the last wins, with everything below it. On registered
//     paths it agrees with encoding/json decoding into map[string]any (a
//     property test and FuzzJSON check this).
//   - CSV (NewCSV): one RFC 4180 record per message, columns named by
//     CSVOptions.Columns or by a header line (then the decoder is stateful:
//     one per source, and it answers the header line with ErrHeader).
//     Unquoted decimal numbers become Numbers, empty unquoted fields Null,
//     everything else (every quoted field included) a String.
//   - Raw (NewRaw): the whole payload in the path "payload", a Number when it
//     is a decimal number, else a String.
//
// # Errors
//
// A message that cannot be decoded yields a *Error whose Reason is a stable
// identifier for metric labels and dead letters:
//
//	malformed_json     not one well-formed JSON object (or nested too deep)
//	malformed_csv      not one CSV record of the configured width
//	missing_timestamp  the timestamp field is absent or null
//	bad_timestamp      the timestamp does not parse, or is beyond ±2^53 ms
//	future_timestamp   reserved for the watermark stage (max_future_skew)
//	wrong_type         a registered JSON number beyond the float64 range;
//	                   a boolean timestamp
//
// On error the record may be partially filled; the pipeline dead-letters it
// and goes on. Programming errors (a Record with fewer slots than the
// schema had) panic.
//
// # Concurrency
//
// JSON and raw decoders and Timestamps are immutable after construction and
// safe for concurrent use. A CSV decoder with Header is not; without Header it
// is immutable too.
//
// # Cost
//
// Decode and Extract allocate nothing once rec.Scratch has grown to the
// largest message's needs, with one exception: a number of more than 19
// significant digits so close to a rounding boundary that its first 19
// digits cannot decide it (strconv parses it from a heap string). Timestamp
// strings in a Go layout other than RFC 3339 go through time.Parse and
// allocate.
package decode
