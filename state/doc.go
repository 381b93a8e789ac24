// Package state is Eddy's keyed state: a byte-level Backend of named
// buckets (one per operator and state) on bbolt behind a bounded write-back
// cache, or in memory; ordered timer queues; change tracking and consistent
// snapshots for incremental checkpoints (docs/architecture.md "State", "Checkpoints").
//
// # Model
//
// A Backend belongs to one operator subtask (one goroutine). Operators
// register their buckets with Bucket, then Get, Put and Delete byte keys.
// With Bolt, reads are served from the cache first; writes stay in the cache
// (dirty) and are written back in batched bbolt transactions of
// BoltOptions.FlushBatch entries, sorted by key — never one commit per
// write (a commit per put runs at ~5.6k/s, batches of 1,000 at ~460k puts/s).
// When the cache outgrows BoltOptions.CacheBytes, clean entries are evicted
// (CLOCK), after a write-back if too many are dirty. A hot key set costs no
// allocation per Get or Put.
//
// Operators keep decoded state of their recently used keys in front of a
// Backend in a Clock, a generic object cache: CLOCK eviction of whole keys
// within a byte budget, dirty keys written back by their owner when evicted
// or flushed. Unlike the write-back cache, it may evict dirty keys, since
// its owner can write one back at once (into the Backend).
//
// # Key layout
//
// Keyed state: keyGroup (2 bytes, big-endian) | key | namespace, so the
// entries of one key group are one contiguous range and a restore with a
// different parallelism selects whole key-group ranges (KeyGroupPrefix,
// SubtaskKeyGroups, RestoreOptions.KeyGroups). Window state (package window,
// statekey.go) writes the key as uvarint length + bytes and the namespace as
// a tag plus the window bounds.
//
// Timers: domain | time (8 bytes, big-endian, sign bit flipped:
// AppendOrderedTime, so negative times order first) | keyGroup | key |
// namespace. The window operator puts the escaped key before the key group
// so that timers of one time pop in key order. A TimerQueue pops them with a
// cursor read ahead in batches, so a million open windows do not need a
// million-entry heap in RAM.
//
// # Life cycle
//
//  1. be, err := OpenBolt(filepath.Join(dataDir, "state.db"), opts), or
//     NewMemory(). OpenBolt discards any file at the path (see below).
//  2. Build the operators (they call Bucket; window.NewStateStore does).
//  3. Restore(entries, opts) from the last checkpoint: the base, then its
//     increments, in order. With a changed parallelism pass the subtask's
//     KeyGroupRange; every bucket must be registered first. The ordered
//     base is written as bbolt pages directly (bulkload.go documents the
//     file format), the increments through bbolt transactions; entries are
//     read in a goroutine of their own, a block ahead.
//  4. Process. Check errors; they are sticky (see Errors).
//  5. At a checkpoint barrier: snap, err := be.Snapshot(full). It takes the
//     change set, copies the cache entries the snapshot needs (the changed
//     ones still cached; for a full snapshot, the dirty ones) and opens a
//     bbolt read transaction: the transaction plus that copy are the state
//     as of the barrier. Nothing is written back to bbolt at the barrier.
//     Its cost follows what changed: changed cache entries are listed as
//     they change, and the copy's buffers come back at Close for the next
//     snapshot. Deletions it recorded leave the cache when bbolt needs
//     nothing more of them, so the cache holds live state.
//     Write snap.Entries to the checkpoint file from another goroutine while
//     processing goes on, then snap.Close(). Incremental snapshots yield the
//     entries written or deleted since the previous Snapshot (deleted =
//     true for deletions); a full one yields everything.
//  6. Close all snapshots, then be.Close().
//
// # The working database is disposable
//
// The bbolt file runs with NoSync (and no freelist sync): a commit costs no
// fsync. After an unclean shutdown it may be corrupt, so it is never
// trusted: OpenBolt deletes it and the state is rebuilt with Restore from
// the last completed checkpoint, whose files have their own fsync
// discipline. Never keep anything in it that must survive a crash on its own.
//
// # Reads from the checkpoint files
//
// With BoltOptions.ColdReads (the agent's default) the working file is no
// longer the whole state: the checkpoint files a subtask wrote lie under
// it as a Cold (AttachCold after each snapshot file is written, RestoreCold
// at a start), and an entry they hold is never written back. The working
// file then takes only the changes the cache cannot keep until the next
// checkpoint, and deletions of keys the files hold, as tagged tombstones
// (cold.go documents the tiers and what "covered" means). The wear below
// is that of a backend without cold reads.
//
// # Wear
//
// The working file is written by write-backs (and by the restore that
// builds it), never at barriers. bbolt rewrites a changed page whole, at
// a new place, and changed keys are spread over the file, so a write-back
// rewrites about every page of the buckets it touches whatever its size:
// the bytes written per hour are about those buckets' size times the
// write-backs per hour. Hence the cache writes back only when 7 entries in
// 8 are dirty, 4000 entries per transaction, and splits pages full
// (FillPercent 1.0; bbolt's default of half doubles a file filled by
// scattered inserts). A key updated less often than the cache turns over
// still reaches the file once per update: at 1M keys with 1% updated per
// 10 s checkpoint (scripts/bench/wear.sh) that is about an entry per
// update, 13 times the compressed increments, most of the agent's writes. Only a
// cache holding the whole state, or misses served from the checkpoint
// files rather than from write-backs, would remove it. Usage.WrittenBytes
// counts what the file was given (eddy_state_file_written_bytes).
//
// # Size limits
//
// BoltOptions.MaxSize bounds the file; the mmap is reserved at that size
// from the start (InitialMmapSize), so bbolt never remaps, and a writer never
// waits behind a long snapshot read transaction. A snapshot's transaction
// pins the pages it sees, so the file grows while it is open. Writing past
// MaxSize returns ErrFull ("state store full: … raise state.max_size or
// reduce …"), never a crash. 32-bit ARM (armv7) has about 3 GiB of user
// address space, fragmented: stay under ~1 GiB (DefaultMaxSize is 512 MiB
// there, 8 GiB on 64-bit platforms).
//
// # Change tracking
//
// The keys changed since the last snapshot are kept in memory, bounded by
// ChangeLimits (4 MiB, or a quarter of the store's keys, by default). Past
// the bound the set is dropped and the next snapshot is full: rewriting
// everything is then cheaper than tracking more. After a Restore the next
// snapshot is full.
//
// # Errors
//
// A failed write (ErrFull, an I/O error) is sticky: every later call returns
// it. The pipeline must stop and restart from the last checkpoint.
//
// # Figures (amd64, 2 cores; go test ./state/ -run Million -v and
// go test ./state/ -run XXX -bench . -benchmem)
//
//   - 1M keys, one open tumbling window each, 8 MiB cache: all aggregates
//     correct; Go heap 14 MiB and RssAnon 26 MiB with all windows open, 17
//     and 39 MiB after all fired; about 24 s.
//   - Hot set (10k keys) Get+Put through the cache: ~93 ns per pair (10.7M
//     pairs/s per core), 0 allocations.
//   - Cold reads (200k keys, 1 MiB cache): ~2.2 µs per Get.
//   - 1% of 1M keys changed, 32 MiB cache: Snapshot (the part that holds
//     up processing) 3–13 ms; barrier to snapshot file and manifest durable
//     20–50 ms on a loaded 2-core machine (go test -run '^$' -bench
//     OnePercentOfMillion ./checkpoint/). Snapshot used to write the dirty
//     entries back first, ~100 ms for 10k scattered keys.
//   - The cost of not flushing at barriers: dirty entries accumulate until
//     7 entries in 8 are dirty (half, when this was measured) and are then
//     written back in one sorted pass. With 1M keys, a 32 MiB cache and
//     10k random updates per checkpoint that was one ~2.4 s pause after
//     about 20 checkpoints (~185k entries),
//     where flushing at every barrier paused 0.2–0.9 s each time, on a
//     machine at load average ~15: less work in total (updates coalesce and
//     pages hold more dirty keys), but a longer single pause. Writing back
//     a bounded number of the oldest entries at a time was tried and was
//     ~4× slower in total (scattered keys, one page rewrite each).
//   - Wear under scattered updates (300k entries of 74 bytes and a timer
//     each, 1% updated at random per checkpoint, 16 MiB cache): 293 bytes
//     written to the file per update and a 45 MiB file; 952 bytes and
//     84 MiB when write-backs started at half the cache dirty, in 1,000-entry
//     transactions with half-full splits (go test ./state/ -run '^$' -bench
//     WearScattered -benchtime 300x).
//   - Restore of 2M entries (1M windows and their timers) into a fresh
//     working file: ~1 s (go test ./state/ -run '^$' -bench RestoreMillion
//     -benchtime 2x); through bbolt puts it took 4.5–5.5 s.
package state
