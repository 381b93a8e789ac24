// Package checkpoint takes consistent snapshots of a running Eddy agent and
// brings them back: the coordinator, barrier alignment, the snapshot file
// format, manifests, retention and restore selection (docs/architecture.md
// "Checkpoints" and "Exactly once"). It does no goroutine or clock work of its
// own: the agent drives it.
//
// # The protocol
//
// Eddy uses Chandy–Lamport snapshots as Flink does: a checkpoint is a barrier
// that flows in-band through the pipeline and cuts every stream into the
// records before it (in checkpoint n) and after it (in n+1).
//
//  1. The Coordinator decides when: every Config.Interval, at least
//     Config.MinPause after the previous one ended, one at a time (sooner
//     when the agent calls Hurry: a full ingest log). Its Ready
//     carries a Trigger; the agent makes every source record its position
//     (the ingest-log offset) and inject barrier n.
//  2. A task with one input snapshots when barrier n arrives and forwards
//     it. A task with several inputs aligns (Aligner): in ExactlyOnce mode it
//     stops reading an input that delivered n until every input did, so no
//     record after n on one input reaches the state before the snapshot; in
//     AtLeastOnce mode it never stops reading and snapshots when the last
//     input delivers n (faster inputs' records after n are replayed on
//     restore: at least once).
//  3. The snapshot is taken from a consistent view (a bbolt read
//     transaction) and written asynchronously while records flow on:
//     Store.WriteSnapshot writes a full or incremental file and makes it
//     durable. The task then sends an Ack with its FileRefs, and sources send
//     their positions; a task that cannot take the checkpoint sends Decline,
//     a failed write Failure.
//  4. When every task in Config.Tasks has acknowledged, Ready carries the
//     Manifest. The agent writes it durably (Store.WriteManifest) and calls
//     Advance: only now is n complete.
//  5. The next Ready lists n in Completed: the agent notifies sinks (the
//     commit phase of two-phase commit: a file sink renames its pre-committed
//     part files, the WAL sink publishes the epoch), runs retention
//     (Store.Retain) and hands the new files to the uploader.
//
// The order is the guarantee: snapshot files durable → manifest durable →
// complete → sinks notified. A crash before the manifest is durable leaves
// files no manifest references (ignored, then removed by CollectGarbage); a
// crash after it but before the sinks commit leaves a complete checkpoint
// whose pre-committed output a restore commits.
//
// A checkpoint that does not complete within Config.Timeout, is declined, or
// fails is aborted (Ready.Aborted). More than Config.TolerableFailures
// failures in a row make Failed return ErrTooManyFailures; savepoint failures
// do not count. Ids increase by one per trigger and, after
// Coordinator.Restore, continue past the newest id on disk.
//
// # The Ready loop
//
//	for {
//		select {
//		case <-ticker.C:
//			c.Tick(monotonicMs())
//		case msg := <-acks:
//			c.Step(msg)
//		}
//		for c.HasReady() {
//			rd := c.Ready()
//			for _, t := range rd.Triggers { injectBarrier(t) }
//			if m := rd.Manifest; m != nil {
//				m.Time = time.Now()
//				if err := store.WriteManifest(m); err != nil {
//					c.Step(checkpoint.Failure{CheckpointID: m.ID, Err: err})
//				}
//			}
//			for _, done := range rd.Completed { notifySinks(done.ID); store.Retain(retain) }
//			for _, ab := range rd.Aborted { log(ab.Reason) }
//			c.Advance()
//		}
//		if err := c.Failed(); err != nil { stop(err) }
//	}
//
// # Full and incremental checkpoints
//
// A periodic checkpoint is incremental while the last completed
// checkpoint's chain stays within Config.MaxChainRatio: each task writes only
// the entries changed since Trigger.Parent, deletions as tombstones. Once
// the chain's increments add up to more than MaxChainRatio × its full files,
// the chain is compacted, so the bytes written per hour follow the change
// rate and a restore reads at most about (1 + MaxChainRatio) × the state
// (plus the increments taken while a merge runs). With Config.MergeChains
// the coordinator hands out a Compaction and checkpoints go on incremental:
// the agent merges each task's chain into a new base from the files on disk
// (Store.MergeChain), in the background, and steps Compacted; the merged
// base takes the chain's place in the next manifests, so it replaces the
// chain only once such a manifest is durable, and retention removes the old
// chain's files once no kept manifest references them. Without
// MergeChains, or after a failed merge, the next checkpoint is full. A task may answer an incremental trigger with a full file
// when its deltas outweigh its base. Each manifest lists the whole chain to
// apply for every task, base first, so restore needs that manifest alone.
// The first checkpoint after a start or restore and every savepoint are
// full; savepoints never become a chain's base, so a savepoint is
// self-contained and checkpoints never depend on one.
//
// # On disk
//
//	<dir>/files/<sha256>.snap      snapshot files (format: snapshot.go),
//	                               content-addressed: a file shared by
//	                               several checkpoints is stored once
//	<dir>/manifests/<id>.json      one per completed checkpoint, id
//	                               zero-padded to 20 digits (manifest.go)
//
// Every file and manifest is written to a temp file, fsynced, renamed, and
// its directory fsynced. Files are portable: they restore on any
// architecture. Retention keeps the newest retain checkpoints and every
// savepoint; it removes manifests first, then the files no kept manifest
// references, so a crash in between leaves only unreferenced files.
//
// # Restore
//
// Store.SelectRestore picks the newest checkpoint whose every file verifies
// (size, SHA-256, header, block CRCs, trailer), skipping damaged ones with a
// reason ("skipped 42: files/ab12….snap: snapshot block at offset 24:
// checksum mismatch"), or the one --from names. Damage is reported by errors
// matching ErrCorrupt; any other error is an I/O error and stops the restore
// rather than silently falling back. The agent applies Selection.Files in
// order with Store.ReadSnapshot, mapping state by FileRef.Pipeline and key
// groups by key, and calls Coordinator.Restore(Selection.NewestID).
//
// # Reading state from snapshot files
//
// A task's state can also be read in place from its chain of files, as an
// LSM tree's levels are, so the working store need hold little more than
// what changed since the last checkpoint. A Table is one file opened for
// point reads (Get) and ordered scans (Scan): an in-memory index of each
// block's offset and first key plus a Bloom filter over every entry, each
// read one ReadAt of one block, CRC-checked. A Chain is a base and its
// increments, newest first, read as the state they amount to; it
// implements state's Cold interface. Tables of files being written come
// with their index collected on the way (Store.WriteSnapshotTable,
// Store.MergeChainTable, Writer.CollectIndex); existing files are indexed
// by one verifying read (Store.OpenTable). A Table keeps its file open,
// so retention may remove the name while a Chain still reads it.
package checkpoint
