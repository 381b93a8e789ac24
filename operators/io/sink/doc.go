// Package sink delivers output records (operators/record): to stdout, to
// JSON Lines files, and to an MQTT broker at least once.
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
