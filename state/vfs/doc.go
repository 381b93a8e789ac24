// Package vfs is the file system under every file Eddy writes to survive a
// power cut: the ingest log, the WAL sink's log, snapshot files and
// manifests, the exactly-once file sink's parts, files downloaded from S3,
// and the directories of the data_dir. Production code uses Default, the
// operating system's file system, with no wrapper around *os.File; tests
// substitute NewCrashableMem, which forgets at a simulated power cut
// everything that was not fsynced, and so shows what a kill -9 cannot (the
// kernel keeps its page cache across a process crash).
//
// The package is a leaf at the top of the module, importing nothing of
// Eddy: the ingest log, the sinks, the checkpoint store and the S3 client's
// downloads (upload) all write through it, and none of them may import
// another's package for it (checkpoint imports upload, not the reverse).
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
