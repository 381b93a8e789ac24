// Package vfs is the file system under every file Eddy writes to survive a
// power cut: the ingest log, the WAL sink's log, snapshot files and
// manifests, the exactly-once file sink's parts, and the directories of the
// data_dir. Production code uses Default, the operating system's file
// system, with no wrapper around *os.File; tests substitute NewCrashableMem,
// which forgets at a simulated power cut everything that was not fsynced,
// and so shows what a kill -9 cannot (the kernel keeps its page cache across
// a process crash).
//
// The package sits under checkpoint because durability is the checkpoint's
// concern: a completed checkpoint is only as good as the ingest-log entries
// it counts and the sink output it commits. It imports nothing of Eddy, so
// operators and agent import it without importing checkpoint itself.
//
// # The durability contract
//
// These are the rules the crash model enforces, and every writer must follow
// (docs/architecture.md "Power loss"):
//
//   - A file's contents are durable up to its last File.Sync; later writes,
//     truncations and overwrites may be lost.
//   - A directory entry — a create, a rename's new and old name, a remove,
//     a subdirectory made by MkdirAll — is durable only after a SyncDir of
//     the directory holding it. MkdirAllSynced creates a path and syncs the
//     parent of every directory it created.
//   - So an atomic replace is: write the temp file, Sync it, Rename, SyncDir.
//     Renaming before the Sync can leave the new name with empty or partial
//     contents after a power cut.
package vfs
