// Package upload ships checkpoint files to S3-compatible storage (AWS S3,
// MinIO, versitygw, any S3 API) and fetches them back, so a replacement
// device can restore the state of a dead one. It speaks S3 through
// minio-go (s3.go), which signs, retries, finds the bucket's region and
// addresses the bucket; credentials come from minio-go's providers
// (credentials.go).
//
// # What is uploaded, and where
//
// The checkpoint package hands over opaque, named blobs; this package never
// parses them. Below Options.Prefix (conventionally "${device_id}/"):
//
//	<prefix>files/<name>            a checkpoint file, e.g. <sha256>.snap
//	<prefix>files/<name>.part-N     chunk N of a file larger than LargeFileSize
//	                                (then <name> itself is the chunk index; chunked.go)
//	<prefix>manifests/<name>        a checkpoint manifest, e.g. <id>.json
//
// Every object is zstd-compressed and, with Options.EncryptionKey, encrypted
// on the device with AES-256-GCM in authenticated 64 KiB segments under a
// key of its own (HKDF-SHA256 from the configured key and a random salt),
// bound to the object's full key in the bucket and the format version; the
// format is self-describing (frame.go) and also recorded in the object's
// metadata (x-amz-meta-eddy-*: format, layout, plaintext size and SHA-256,
// compression, encryption, key id).
//
// # Guarantees
//
//  1. Content addressing: a file name identifies its bytes, so PutFile uploads
//     a name once; later calls find the object (same size, same key) and skip
//     it. A file shared by many checkpoints is stored once.
//  2. Manifest last: the Shipper uploads a checkpoint's files, then its
//     manifest. A checkpoint exists remotely exactly when its manifest does;
//     a manifest never references a missing file (retention deletes
//     manifests before files).
//  3. Verified reads: GetFile checks the plaintext's SHA-256 against the
//     manifest's and writes the local file only complete (temp, fsync,
//     rename). A damaged or tampered object is ErrCorrupt naming the object;
//     an object encrypted with another key is ErrWrongKey. With encryption,
//     manifests are authenticated too; without it, only accidental damage
//     is caught in manifests (zstd checksum, metadata SHA-256).
//  4. Never blocking: Shipper.Ship queues and returns; uploads retry with
//     exponential backoff and jitter for as long as the uplink is down. The
//     queue is bounded: the oldest waiting checkpoint is superseded by a
//     newer one (Shipper documents the rule).
//  5. Resumable large files: files above LargeFileSize go in 8 MiB chunk
//     objects, and an interrupted upload resumes at the first missing
//     chunk, also after a restart.
//  6. Bounded resources: Options.MaxBandwidth caps the bytes per second;
//     memory is about two chunks per concurrent transfer
//     (Options.Concurrency); encoders and buffers are pooled.
//
// # Recovery point
//
// A device restored from the bucket resumes from the last checkpoint whose
// manifest was uploaded. Readings acknowledged after that checkpoint died
// with the old device; outputs of the epochs after it may be delivered again
// by the new device, with the same deterministic ids, so consumers drop them.
// The loss window is the recovery-point lag, Stats.RecoveryPointLag = now −
// completion time of the last uploaded checkpoint: about the checkpoint
// interval plus the upload time when the uplink is up, growing while it is
// down. Export it as a metric and alert on it.
//
// # Life cycle
//
//	c, err := upload.New(opts, log)           // no network I/O
//	err = c.Check(ctx)                        // optional: report bad config early
//	s := upload.NewShipper(c, upload.ShipperOptions{OnUploaded: ...}, log)
//	go s.Run(ctx)
//	s.Ship(id, id+".json", manifest, files)   // after each completed checkpoint
//	s.Retain(keep, referencedFiles)           // after local retention
//	s.Flush(ctx)                              // at shutdown, with a deadline
//	c.Close()                                 // stops fetching credentials
//
// Restore: ListManifests, GetManifest of the newest, GetFile of each file
// it lists with the SHA-256 it records. A manifest or file that fails with
// ErrCorrupt, ErrWrongKey or ErrNotFound is the checkpoint's own fault: the
// caller skips it and tries the manifest before it, as the agent does;
// any other error (the network, credentials) would fail that one too.
package upload
