// Package offsite keeps the agent's checkpoints off the device: it ships
// the completed ones to S3 and fetches them back onto a device whose local
// checkpoints are lost or damaged. The S3 protocol, the object format and
// the shipper's queue are package upload's; this package decides what to
// ship, when, and where a fetched checkpoint goes.
//
// It owns:
//
//   - The S3 client of an upload block (NewClient), built from a Target:
//     plain values the caller resolves (the upload block, the device id,
//     the bucket and the prefix with ${device_id} expanded). It reads no
//     configuration file and nothing in data_dir.
//   - The Uploader: ships every completed checkpoint, files first and the
//     manifest last, retrying while the uplink is down, without ever
//     blocking the checkpointer; mirrors local retention remotely; asks
//     local retention to keep what is not uploaded yet, up to 32
//     checkpoints; gives the final checkpoint up to 15 seconds at shutdown
//     (Flush); registers the eddy_upload_* gauges; reports its figures for
//     /api/agent and /readyz (Stats).
//   - The fetch of an uploaded checkpoint into data_dir's checkpoint store
//     (RestoreFromS3 for `eddy restore --from s3://…`, FetchNewest for a
//     start that finds no local checkpoint that verifies): every file and
//     the manifest verified before the store changes, staged in
//     data_dir/restore.tmp (StagingDir), files renamed into the store and
//     their directory synced before the manifest is written. A checkpoint
//     whose own objects do not verify is skipped for the one before it;
//     any other failure stops the fetch.
//   - The objects' names: a file keeps its local file's base name (the
//     store's names are content-addressed), a manifest is
//     <20-digit checkpoint id>.json; package upload puts them below
//     <prefix>files/ and <prefix>manifests/.
//
// It is handed, and sees the agent only through: a Target, the Store
// interface (the local store's directory and manifests, read only), the
// Checkpointer interface (the OnCompleted and KeepUnshipped hooks), the
// data_dir path, a vfs.FS for a restore's writes, a *slog.Logger and the
// *metrics.Set the gauges go in.
package offsite
