// Package sink encodes window firings as Eddy's output record and delivers
// them: to stdout, to JSON Lines files, and to an MQTT broker at least once.
//
// # Output record
//
// Every window firing becomes one JSON object (AppendJSON):
//
//	{"id":"gw-7/temp_1m/sensor-3/1795946400000-1795946460000/0",
//	 "pipeline":"temp_1m","key":"sensor-3",
//	 "window_start":"2026-11-29T10:00:00.000Z","window_end":"2026-11-29T10:01:00.000Z",
//	 "window_start_ms":1795946400000,"window_end_ms":1795946460000,
//	 "kind":"final","firing":0,"avg_temp":21.43,"max_temp":22.1,"n":12}
//
// (on one line). The id is "<device_id>/<pipeline>/<key>/<start_ms>-<end_ms>/<firing>":
// deterministic, so a consumer that sees an id twice can drop the repeat —
// outputs may be sent again after a restore or by the at-least-once MQTT
// sink. Every firing carries the full aggregate of the window so far; the
// firing with the highest number per (pipeline, key, window) is the result.
// Aggregates follow in config order; NaN and ±Inf are written as null.
// Aggregate names are written as given: the config must keep them distinct
// from the fixed field names.
//
// Messages that could not be processed, and readings too late for any
// window, are written with AppendDeadLetter, carrying the original message
// as a JSON string.
//
// Both encoders append to a caller-owned buffer and do not allocate when it
// has room; strings are escaped so the output is valid JSON even for keys
// with quotes, control characters or invalid UTF-8 (each invalid byte
// becomes U+FFFD).
//
// # Life cycle of a sink
//
// The agent encodes each firing into a reused buffer, collects a batch of
// Items (payload plus, for firings, the Result), and calls Write. A Sink
// may buffer: Flush hands everything written so far to the OS or the broker,
// and the agent calls it at the end of each batch or checkpoint. Close
// flushes and releases the destination. Items and the memory they reference
// are only valid during Write. The sinks here are safe for concurrent use.
//
//   - NewStdout writes JSON Lines, or with pretty set one aligned line per
//     firing for people (the quickstart).
//   - NewFile appends JSON Lines through a 64 KiB buffer, rotates by size
//     (path → path.1 → … → path.MaxFiles) and optionally fsyncs on Flush.
//   - NewMQTT publishes each item at QoS 0 or 1 to a topic rendered from a
//     Template, and Write returns only when the broker has acknowledged the
//     whole batch (or fails after a timeout). It is at least once: a retried
//     batch can repeat items. Exactly-once delivery upstream is the WAL
//     sink's job (docs/architecture.md), not this package's.
//
// # Topic templates
//
// ParseTemplate compiles "sites/${device_id}/${pipeline}/${key}" once;
// Template.Append renders it per item without allocating. window_start and
// window_end render as Unix milliseconds. Substituted values become single
// topic levels: '/', '+', '#', NUL and invalid UTF-8 are replaced by '_', so
// a key can neither add levels nor inject MQTT wildcards (which a broker
// rejects in a PUBLISH by closing the connection).
//
// # Broker settings
//
// With QoS 1 the sink keeps up to a whole batch in flight, so the broker's
// per-client in-flight and queue limits should allow it; for mosquitto:
//
//	max_inflight_messages 1000
//	max_queued_messages   1000000
//	persistence           true
package sink
