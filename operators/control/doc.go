// Package control holds a pipeline's control state: the document built
// from a low-rate control stream (an MQTT topic carrying per-device
// thresholds or calibration offsets pushed from the cloud) that filter,
// map and key expressions read as control.* (see package expr).
//
// # Model
//
// The state is one JSON object. Its members are objects (nested to at
// most MaxDepth levels) or leaves: numbers, strings, bools and arrays.
// Arrays are leaves: they are replaced whole, never merged, and read as
// their JSON text. The state never holds null: null deletes.
//
// Each control message is a JSON object merged into the state as a JSON
// Merge Patch (RFC 7386):
//
//   - a member whose value is an object merges into the object at that
//     key, key by key, creating it (or replacing a leaf there) if needed;
//   - a member whose value is null deletes the key (and everything under
//     it); deleting a key that is not there does nothing;
//   - any other value replaces what was at the key.
//
// So after {"threshold": {"d1": 30}} and {"threshold": {"d2": 31}} the
// state is {"threshold": {"d1": 30, "d2": 31}}, and {"threshold": {"d1":
// null}} then removes d1. A key repeated within one object keeps its last
// value (encoding/json's rule). Applying a message twice equals applying it
// once, so replaying the control stream from a checkpoint's position after
// restoring that checkpoint's Snapshot gives the same state.
//
// A message that is not one JSON object, or would exceed the Limits, is
// refused whole (ErrMalformed, ErrLimit) and the state stays as it was:
// the agent dead-letters it and goes on.
//
// # Reading
//
// Readers walk the state by key: State.Lookup for a static path
// (control.a.b), State.Index for a path plus a key taken from a reading
// (control.threshold[event.device]), or Node for anything longer. A path
// that does not exist reads as a Missing value, so expressions treat it
// as null. Values are what the JSON decoder would give for the same
// document: numbers, strings and bools as themselves, arrays and objects
// as Strings holding their canonical JSON text. Lookups do not allocate
// (reading an object's text allocates it once per change).
//
// # Life cycle and concurrency
//
// A State belongs to one goroutine: the pipeline's prepare stage, which
// evaluates filter, map and key expressions. The agent delivers each
// control message to that goroutine, which calls Apply between two
// readings; every reading evaluated afterwards sees the new state. A
// control stream is broadcast state: every reading of the pipeline sees
// the same document whatever its key, and the control stream never holds
// the watermark back.
//
// At a checkpoint barrier the stage stores Snapshot with its other state;
// on restore it calls Restore before any reading. Snapshot is canonical
// JSON (keys sorted, no spaces, numbers in shortest form), so equal states
// give equal bytes on every architecture.
//
// # Limits
//
// Limits.MaxKeys (default 100k) bounds the keys over all levels and
// Limits.MaxBytes (default 8 MiB) the bytes of keys and string and array
// values, so a runaway control stream cannot exhaust a small device's
// memory. Version counts successful changes; callers may cache resolved
// Nodes and drop them when it moves.
package control
