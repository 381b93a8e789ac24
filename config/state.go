package config

import (
	"time"

	"github.com/hashicorp/hcl/v2"
)

// State is the state block: the working keyed-state store.
type State struct {
	// Backend is "bbolt" (default) or "memory".
	Backend string
	// CacheBytes bounds the write-back caches in front of the stores and
	// per-key functions' decoded states together, shared by the subtasks;
	// 0 (the default) means derived from the device at start: an
	// eighth of the Go memory limit, between 4 and 32 MiB
	// (devicemem.DefaultStateCache).
	CacheBytes int64
	// MaxSizeBytes bounds the bbolt file; default 1 GiB.
	MaxSizeBytes int64
	// ReadCheckpoints (read_checkpoints, default true): cache misses are
	// read from the checkpoint files, and the bbolt file holds only the
	// changes the cache cannot keep until the next checkpoint; false
	// keeps a whole copy of the state in it, written back update by
	// update (state.BoltOptions.ColdReads).
	ReadCheckpoints bool
	DeclRange       hcl.Range
}

func (d *decoder) decodeState(b *hcl.Block) State {
	st := State{Backend: "bbolt", MaxSizeBytes: 1 << 30, ReadCheckpoints: true}
	if b == nil {
		return st
	}
	a, _ := d.content(b, []string{"backend", "cache", "max_size", "read_checkpoints"})
	st.DeclRange = b.DefRange
	st.Backend = a.enum("backend", []string{"bbolt", "memory"}, st.Backend)
	st.CacheBytes = a.size("cache", st.CacheBytes)
	st.MaxSizeBytes = a.size("max_size", st.MaxSizeBytes)
	st.ReadCheckpoints = a.boolean("read_checkpoints", st.ReadCheckpoints)
	if st.MaxSizeBytes < 1<<20 {
		d.errorf(a.rangeOf("max_size"), "Value out of range", "\"max_size\" must be at least 1MiB.")
	}
	if a.has("cache") && st.CacheBytes < 1<<20 {
		d.errorf(a.rangeOf("cache"), "Value out of range", "\"cache\" must be at least 1MiB; leave it out to size it to the device.")
	}
	if st.CacheBytes > st.MaxSizeBytes {
		d.errorf(a.rangeOf("cache"), "Value out of range", "\"cache\" cannot exceed max_size.")
	}
	return st
}

// Checkpoint modes.
const (
	CheckpointExactlyOnce = "exactly_once"
	CheckpointAtLeastOnce = "at_least_once"
)

// Checkpoint is the checkpoint block (docs/architecture.md "Checkpoints").
type Checkpoint struct {
	// Interval between checkpoint starts, positive; default 10s.
	Interval time.Duration
	// MinPause between the end of one checkpoint and the next start; default 0.
	MinPause time.Duration
	// Timeout aborts a checkpoint; positive, default 1m.
	Timeout time.Duration
	// TolerableFailures in a row before the agent fails; default 3.
	TolerableFailures int
	// Retain is how many completed checkpoints to keep, at least 1; default 3.
	Retain int
	// MaxSavepoints is how many savepoints may be kept; a savepoint past it
	// is refused (savepoints are only removed by hand). Default 10.
	MaxSavepoints int
	// Mode is CheckpointExactlyOnce (default, aligned) or
	// CheckpointAtLeastOnce (no alignment).
	Mode string
	// MaxChainRatio: a new full snapshot is taken once the chain's
	// incremental snapshots add up to more than this many times its full
	// one, so bytes written follow the change rate, not the state size, and
	// a restore reads at most about (1 + MaxChainRatio) × the state. 0
	// makes every checkpoint full; default 1.5: the bases written and
	// uploaded come to 1/MaxChainRatio of the increments, so the uplink
	// carries about 1.67× the changes (2× at 1).
	MaxChainRatio float64
	// FullEvery, deprecated (a warning says so), also caps the chain at
	// this many checkpoints; 0 when not set.
	FullEvery int
	// Unaligned makes every checkpoint but savepoints and the final one
	// unaligned: window subtasks take the barrier ahead of their queued
	// input and store the records it overtook in the checkpoint, to be
	// replayed on restore. Default false.
	Unaligned bool
	// AlignedTimeout switches a checkpoint from aligned to unaligned at a
	// subtask that has waited this long for the barrier since it was
	// announced; 0 (default) means never.
	AlignedTimeout time.Duration
	// DebugAlwaysMerge, for tests, merges every chain that outgrows
	// MaxChainRatio in the background, however small its base (see
	// checkpoint.Config.MinMergeBase).
	DebugAlwaysMerge bool
	DeclRange        hcl.Range
}

func (d *decoder) decodeCheckpoint(b *hcl.Block) Checkpoint {
	cp := Checkpoint{Interval: 10 * time.Second, Timeout: time.Minute, TolerableFailures: 3, Retain: 3, MaxSavepoints: 10, Mode: CheckpointExactlyOnce, MaxChainRatio: 1.5}
	if b == nil {
		return cp
	}
	a, _ := d.content(b, []string{"interval", "min_pause", "timeout", "tolerable_failures", "retain", "max_savepoints", "mode", "max_chain_ratio", "full_every", "unaligned", "aligned_timeout", "debug_always_merge"})
	cp.DeclRange = b.DefRange
	cp.Interval = a.duration("interval", cp.Interval)
	cp.MinPause = a.duration("min_pause", 0)
	cp.Timeout = a.duration("timeout", cp.Timeout)
	cp.TolerableFailures = int(a.integer("tolerable_failures", 3, 0, 1<<31-1))
	cp.Retain = int(a.integer("retain", 3, 1, 1<<31-1))
	cp.MaxSavepoints = int(a.integer("max_savepoints", 10, 1, 1<<31-1))
	cp.Mode = a.enum("mode", []string{CheckpointExactlyOnce, CheckpointAtLeastOnce}, cp.Mode)
	cp.MaxChainRatio = a.float("max_chain_ratio", cp.MaxChainRatio, 0, 1000)
	if a.has("full_every") {
		cp.FullEvery = int(a.integer("full_every", 0, 1, 1<<31-1))
		a.d.warnf(a.rangeOf("full_every"), "Deprecated argument",
			"full_every still caps the chain of incremental snapshots at this many checkpoints, but a count makes a large state rewrite itself however little changed; remove it and let max_chain_ratio (default 1.5) start a new full snapshot once the increments outweigh it.")
	}
	cp.Unaligned = a.boolean("unaligned", false)
	cp.AlignedTimeout = a.duration("aligned_timeout", 0)
	cp.DebugAlwaysMerge = a.boolean("debug_always_merge", false)
	for _, n := range []string{"interval", "timeout"} {
		if a.has(n) && (n == "interval" && cp.Interval == 0 || n == "timeout" && cp.Timeout == 0) {
			d.errorf(a.rangeOf(n), "Value out of range", "%q must be positive; %s.", n, durationHint)
		}
	}
	if cp.Mode == CheckpointAtLeastOnce && (cp.Unaligned || cp.AlignedTimeout > 0) {
		d.errorf(a.rangeOf("mode"), "Conflicting arguments", "Unaligned checkpoints exist to keep exactly-once under backpressure; at_least_once does not align at all.")
	}
	return cp
}

// Ingest acknowledgement modes (docs/architecture.md "Exactly once, end to end").
const (
	AckAfterFsync = "after_fsync"
	AckAfterWrite = "after_write"
)

// Ingest is the ingest block: the durable log in front of every MQTT source.
type Ingest struct {
	// Ack is AckAfterFsync (default; survives power loss) or AckAfterWrite.
	Ack string
	// SyncInterval bounds the data lost on power loss under AckAfterWrite;
	// default 100ms.
	SyncInterval time.Duration
	// MaxDiskBytes bounds the log; default 1 GiB.
	MaxDiskBytes int64
	// Linger is the shortest time between two commits of the log (an
	// fsync under AckAfterFsync, a write under AckAfterWrite) while fewer
	// than 768 messages (64 KiB) wait; what arrives meanwhile shares the next
	// commit, and acknowledgements wait for it. Default
	// DefaultIngestLinger; 0 commits as soon as the previous one is done.
	Linger time.Duration
	// Compression is IngestCompressionZstd (default: batches are stored
	// zstd-compressed when that makes them smaller), IngestCompressionS2
	// (about a quarter of zstd's CPU, 2-4.5x its bytes on JSON readings) or
	// IngestCompressionNone.
	Compression string
	DeclRange   hcl.Range
}

// Ingest log compression (ingest { compression }).
const (
	IngestCompressionS2   = "s2"
	IngestCompressionZstd = "zstd"
	IngestCompressionNone = "none"
)

// DefaultIngestLinger is the default ingest { linger }.
const DefaultIngestLinger = 100 * time.Millisecond

func (d *decoder) decodeIngest(b *hcl.Block) Ingest {
	in := Ingest{Ack: AckAfterFsync, SyncInterval: 100 * time.Millisecond, MaxDiskBytes: 1 << 30, Linger: DefaultIngestLinger,
		Compression: IngestCompressionZstd}
	if b == nil {
		return in
	}
	a, _ := d.content(b, []string{"ack", "sync_interval", "max_disk", "linger", "compression"})
	in.DeclRange = b.DefRange
	in.Ack = a.enum("ack", []string{AckAfterFsync, AckAfterWrite}, in.Ack)
	in.SyncInterval = a.duration("sync_interval", in.SyncInterval)
	in.MaxDiskBytes = a.size("max_disk", in.MaxDiskBytes)
	in.Linger = a.duration("linger", in.Linger)
	in.Compression = a.enum("compression", []string{IngestCompressionS2, IngestCompressionZstd, IngestCompressionNone}, in.Compression)
	if in.Linger > time.Second {
		d.errorf(a.rangeOf("linger"), "Value out of range", "\"linger\" must be at most 1s: every acknowledgement waits up to that long.")
	}
	if a.has("sync_interval") && in.SyncInterval == 0 {
		d.errorf(a.rangeOf("sync_interval"), "Value out of range", "\"sync_interval\" must be positive; %s.", durationHint)
	}
	if in.MaxDiskBytes < 1<<20 {
		d.errorf(a.rangeOf("max_disk"), "Value out of range", "\"max_disk\" must be at least 1MiB.")
	}
	return in
}
