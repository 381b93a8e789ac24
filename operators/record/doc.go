// Package record is what a pipeline emits, and its JSON encoding: window
// firings (Result), readings and signals of the per-key blocks, and dead
// letters. It is pure (no I/O): the stages encode records here, and the
// sinks under operators/io deliver them.
//
// Every window firing becomes one JSON object (AppendJSON):
//
//	{"id":"gw-7/temp_1m/sensor-3/1795946400000-1795946460000/0",
//	 "pipeline":"temp_1m","key":"sensor-3",
//	 "window_start":"2026-11-29T10:00:00.000Z","window_end":"2026-11-29T10:01:00.000Z",
//	 "window_start_ms":1795946400000,"window_end_ms":1795946460000,
//	 "kind":"final","firing":0,"definition":"3497503d","avg_temp":21.43,"max_temp":22.1,"n":12}
//
// (on one line). The id is "<device_id>/<pipeline>/<key>/<start_ms>-<end_ms>/<firing>":
// deterministic, so a consumer that sees an id twice can drop the repeat —
// outputs may be sent again after a restore or by the at-least-once MQTT
// sink. Every firing carries the full aggregate of the window so far; the
// firing with the highest number per (pipeline, key, window) is the result.
// definition is the short hash of the pipeline definition that computed it
// (omitted when the stage gives none). Aggregates follow in config order;
// NaN and ±Inf are written as null.
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
package record
