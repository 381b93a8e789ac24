// Package config loads an Eddy agent configuration: one HCL file decoded into
// plain Go structs with every default applied, and validated as a whole.
//
// # Life cycle
//
// Load (or Parse, for tests) parses the file, decodes every block and checks
// everything it can without touching the network: types, ranges, enums,
// durations and sizes, MQTT topic filters, broker URLs, template variables,
// references between blocks, window parameters and aggregate calls. It never
// stops at the first mistake: the returned hcl.Diagnostics hold every error,
// each with a Subject (file:line:col), a short Summary and a Detail that
// hints at the fix ("Did you mean ...?", `durations look like "2s"`). On any
// error the *Config is nil; warnings (an unused source or sink) come with a
// usable Config. FormatDiagnostics renders them one per line.
//
// Loader makes the outside world injectable: Env for env() and DeviceID for
// the default device id (derived from /etc/machine-id, else the host name).
//
// # Schema
//
// examples/full.hcl shows every block and attribute the decoder accepts,
// with its default; TestFullExample_HasEverything holds that file against the
// decoder's schema, so the example cannot fall behind (a list here could,
// and did). docs/configuration.md explains each block.
//
// The field documentation of each struct states its default and range.
// Source and sink names are unique within their kind (across types, as they
// name directories and metrics) and are identifiers, so that references
// work; pipeline names likewise.
//
// # Values
//
// Durations are strings: Go's time.ParseDuration syntax plus a leading count
// of whole days ("500ms", "2s", "1h30m", "1d"); negative is an error, except
// for a window's offset ("-8h"). Sizes
// are a whole number of bytes or a string with a unit: "512KiB", "64MiB",
// "1GiB" (powers of 1024), "100MB" (powers of 1000); decimals are allowed
// ("1.5GiB").
//
// Any value may call env("NAME") (an unset variable is an error at the call,
// unless a default is given: env("NAME", "default")) and file("path") (the
// contents with trailing newlines removed, relative to the config file's
// directory). These run once at load time.
//
// # References and expressions
//
// from, to, late_output and dead_letter are references, not strings:
// from = source.mqtt.sensors, to = [sink.mqtt.cloud]. They are resolved to
// *Source and *Sink here. filter, key, map values and aggregate arguments are
// expressions over event; they are kept as hcl.Expression for operators/expr
// to compile. Only the call shape of each aggregate is checked: count(),
// percentile(expr, q) with a literal 0 < q < 1, and one argument for sum, min,
// max, avg, first, last, stddev, variance and median.
//
// # Templates
//
// Some strings are templates the agent fills in at run time, so one file
// serves a fleet. They are written with HCL's own interpolation syntax,
// unescaped: topic = "sites/${device_id}/${pipeline}/${key}". While decoding,
// each variable a field allows evaluates to its own spelling, so the Config
// holds the template verbatim ("sites/${device_id}/..."); the agent calls
// Expand. A variable a field does not allow, or an unknown one, is an error at
// its position. The fields and their variables:
//
//	source mqtt client_id, topics; sink mqtt client_id; upload prefix:
//	        ${device_id}
//	sink mqtt topic: ${device_id} ${pipeline} ${key} ${window_start}
//	        ${window_end}
//	source simulator topic: ${sensor} (a whole topic level)
//
// Every other string takes no variables. Writing $${name} yields the same
// template text and is checked the same way.
//
// # Time domain of windows
//
// A tumbling, sliding or session window runs on event time when its source
// has a timestamp block and on processing time otherwise; time = "event" on a
// source without one is an error. A simulator's readings carry "ts" in
// milliseconds, so a simulator source has Timestamp{Field: "ts", Unit: "ms"}.
//
// # Fingerprint
//
// Config.Fingerprint is the SHA-256 of the source text with line endings and
// trailing blanks normalized; checkpoint manifests record it.
package config
