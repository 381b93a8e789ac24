package agent

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/eddy-edge/eddy/agent/identity"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/state/vfs"
	"github.com/eddy-edge/eddy/upload"
)

// uploadClient builds the S3 client of the configuration's upload block,
// with bucket and prefix optionally overridden (restore --from s3://…).
func uploadClient(cfg *config.Config, fsys vfs.FS, bucket, prefix string, log *slog.Logger, progress func(upload.Progress)) (*upload.Client, error) {
	if cfg.Upload != nil && prefix == "" {
		// The data_dir's recorded id, as the agent runs under (read only:
		// a mismatch is for `eddy run` to report).
		c := *cfg
		if err := identity.SettleDeviceID(&c, false, false); err != nil {
			return nil, err
		}
		prefix = config.Expand(cfg.Upload.Prefix, map[string]string{"device_id": c.Agent.DeviceID})
	}
	return newUploadClient(cfg, fsys, bucket, prefix, log, progress)
}

// newUploadClient is uploadClient with the prefix given: it reads nothing
// in data_dir, so validate can build the client too. fsys is the file
// system of the local files it uploads and downloads.
func newUploadClient(cfg *config.Config, fsys vfs.FS, bucket, prefix string, log *slog.Logger, progress func(upload.Progress)) (*upload.Client, error) {
	u := cfg.Upload
	if u == nil {
		return nil, errors.New("agent: the configuration has no upload block: add upload \"s3\" { endpoint, bucket, … }")
	}
	key, err := encryptionKey(u.EncryptionKey)
	if err != nil {
		return nil, err
	}
	if bucket == "" {
		bucket = u.Bucket
	}
	creds, err := credentialProvider(cfg)
	if err != nil {
		return nil, err
	}
	return upload.New(upload.Options{Endpoint: u.Endpoint, Bucket: bucket, Prefix: prefix, Region: u.Region,
		AccessKey: u.AccessKey, SecretKey: u.SecretKey, Credentials: creds, Secure: u.Secure, CAFile: u.CAFile, PathStyle: u.PathStyle,
		MaxBandwidth: u.MaxBandwidthBytes, Concurrency: u.Concurrency, CreateBucket: u.CreateBucket,
		EncryptionKey: key, Progress: progress, FS: fsys}, log)
}

// credentialProvider returns the provider of the upload block's credentials
// block, or nil for minio-go's standard chain.
func credentialProvider(cfg *config.Config) (credentials.Provider, error) {
	c := cfg.Upload.Credentials
	if c == nil {
		return nil, nil
	}
	files := upload.CertificateFiles{CertFile: c.CertFile, KeyFile: c.KeyFile, CAFile: c.CAFile}
	switch c.Provider {
	case config.CredentialsAWSIoT:
		return upload.NewAWSIoTProvider(upload.AWSIoTOptions{Endpoint: c.Endpoint, RoleAlias: c.RoleAlias,
			ThingName: config.Expand(c.ThingName, map[string]string{"device_id": cfg.Agent.DeviceID}), CertificateFiles: files})
	case config.CredentialsMinIOSTSCertificate:
		endpoint := c.Endpoint
		if endpoint == "" {
			endpoint = "https://" + cfg.Upload.Endpoint
		}
		return upload.NewMinIOCertificateProvider(upload.MinIOCertificateOptions{Endpoint: endpoint, Duration: c.Duration, CertificateFiles: files})
	}
	return nil, nil
}

// encryptionKey decodes upload.encryption_key: 32 bytes as 64 hex digits or
// as base64 (typically from env() or file()).
func encryptionKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	return nil, errors.New("agent: upload encryption_key must be 32 bytes, written as 64 hex digits or base64 (e.g. openssl rand -hex 32)")
}

// uploader ships completed checkpoints to S3 (the upload block) in the
// background: files first, the manifest last, retrying while the uplink is
// down; it never blocks processing or checkpointing. Remote retention
// mirrors the local one, and local retention keeps what is not shipped yet
// (within a budget).
type uploader struct {
	log *slog.Logger
	// shipper is set by start, before the run's goroutines read it; nil
	// without an upload block.
	shipper *upload.Shipper
	// seen publishes shipper to the admin endpoint, which starts first
	// (the upload's start may wait for the S3 server).
	seen atomic.Pointer[upload.Shipper]
}

// stats are the shipper's figures; nil before start or without an upload
// block. Safe for concurrent use.
func (u *uploader) stats() *upload.Stats {
	ship := u.seen.Load()
	if ship == nil {
		return nil
	}
	st := ship.Stats()
	return &st
}

// start ships every checkpoint ck completes from now on, and the newest
// one already in its store, until ctx ends. A check of the bucket that
// fails is logged, not returned: checkpoints stay local and uploads retry.
func (u *uploader) start(ctx context.Context, cfg *config.Config, ck *checkpointer, set *metrics.Set) error {
	store := ck.store
	client, err := uploadClient(cfg, vfs.Default, "", "", u.log, nil)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := client.Check(cctx); err != nil {
		// Wrong credentials or a missing bucket must not stop a device:
		// checkpoints stay local and the shipper keeps retrying.
		u.log.Error("S3 upload not possible yet; checkpoints stay local and uploads retry", "err", err)
	}
	cancel()
	ship := upload.NewShipper(client, upload.ShipperOptions{}, u.log)
	u.shipper = ship
	u.seen.Store(ship)
	registerUploadMetrics(set, ship)
	go func() {
		defer client.Close()
		if err := ship.Run(ctx); err != nil && ctx.Err() == nil {
			u.log.Error("upload stopped", "err", err)
		}
	}()
	ck.onCompleted(func(done checkpoint.Completed) { u.ship(store, done) })
	// Local checkpoints stay until uploaded (the newest uploaded one too),
	// within a budget: past it the oldest unshipped give way, with a warning.
	const maxUnshipped = 32
	ck.keepUnshipped = func() int {
		ids, err := store.ManifestIDs()
		if err != nil {
			return 0
		}
		last, _ := strconv.ParseUint(ship.Stats().LastUploadedID, 10, 64)
		n := 1
		for _, id := range ids {
			if id > last {
				n++
			}
		}
		if n > maxUnshipped {
			u.log.Warn("upload is behind: deleting local checkpoints that were never uploaded", "unshipped", n-1, "kept", maxUnshipped)
			n = maxUnshipped
		}
		return n
	}
	// The shipper's queue does not survive a restart: ship the newest local
	// checkpoint again (files already in the bucket are not re-sent).
	if ids, err := store.ManifestIDs(); err == nil && len(ids) > 0 {
		if m, err := store.ReadManifest(ids[len(ids)-1]); err == nil {
			u.ship(store, checkpoint.Completed{ID: m.ID, Kind: m.Kind, Manifest: m})
		}
	}
	return nil
}

// flush gives the shipper a little time at shutdown to send the final
// checkpoint; what it cannot send is shipped at the next start.
func (u *uploader) flush() {
	if u.shipper == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := u.shipper.Flush(ctx); err != nil {
		u.log.Warn("final checkpoint not uploaded yet; it will be at the next start", "err", err)
	}
}

// ship queues checkpoint done's files and manifest, and the remote
// retention that keeps what store keeps.
func (u *uploader) ship(store *checkpoint.Store, done checkpoint.Completed) {
	m := done.Manifest
	data, err := checkpoint.MarshalManifest(m)
	if err != nil {
		u.log.Error("upload: encode manifest", "id", m.ID, "err", err)
		return
	}
	var files []upload.FileRef
	for _, f := range m.Files {
		files = append(files, upload.FileRef{Name: path.Base(f.Name), LocalPath: filepath.Join(store.Dir(), f.Name),
			SHA256: f.SHA256, Size: f.Size})
	}
	u.shipper.Ship(strconv.FormatUint(m.ID, 10), manifestObject(m.ID), data, files)
	ids, err := store.ManifestIDs()
	if err != nil {
		return
	}
	var keep []string
	for _, id := range ids {
		keep = append(keep, manifestObject(id))
	}
	u.shipper.Retain(keep, referencedFiles)
}

// manifestObject is a manifest's object name below <prefix>manifests/.
func manifestObject(id uint64) string { return fmt.Sprintf("%020d.json", id) }

// referencedFiles lists the file objects a manifest needs.
func referencedFiles(manifest []byte) []string {
	m, err := checkpoint.UnmarshalManifest(manifest)
	if err != nil {
		return nil
	}
	var names []string
	for _, f := range m.Files {
		names = append(names, path.Base(f.Name))
	}
	return names
}

func registerUploadMetrics(set *metrics.Set, ship *upload.Shipper) {
	set.NewGauge("eddy_upload_pending_checkpoints", func() float64 { return float64(ship.Stats().Pending) })
	set.NewGauge("eddy_upload_bytes_total", func() float64 { return float64(ship.Stats().BytesUploaded) })
	set.NewGauge("eddy_upload_failures_total", func() float64 { return float64(ship.Stats().Failures) })
	set.NewGauge("eddy_upload_recovery_point_lag_seconds", func() float64 { return ship.Stats().RecoveryPointLag.Seconds() })
	set.NewGauge("eddy_upload_last_id", func() float64 {
		id, _ := strconv.ParseUint(ship.Stats().LastUploadedID, 10, 64)
		return float64(id)
	})
}

// S3Location is a parsed s3://bucket/prefix[/ID] address.
type S3Location struct {
	Bucket, Prefix string
	ID             uint64 // 0: the newest
}

// ParseS3 parses s3://bucket/prefix[/ID]. A last path element of digits
// names a checkpoint id.
func ParseS3(s string) (S3Location, error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return S3Location{}, fmt.Errorf("%q is not an s3:// address", s)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return S3Location{}, fmt.Errorf("%q names no bucket", s)
	}
	loc := S3Location{Bucket: bucket}
	prefix = strings.TrimSuffix(prefix, "/")
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 || prefix != "" {
		last := prefix[i+1:]
		if id, err := strconv.ParseUint(last, 10, 64); err == nil && len(last) > 0 {
			loc.ID = id
			prefix = prefix[:max(i, 0)]
		}
	}
	if prefix != "" {
		prefix += "/"
	}
	loc.Prefix = prefix
	return loc, nil
}

// RestoreFromS3 downloads a checkpoint (the newest that verifies, or
// loc.ID) and its files from S3 into the data_dir of the configuration at
// cfgPath, verifying every checksum, so that the next `eddy run` restores
// it. It reports progress to w. Nothing in data_dir's checkpoint store
// changes unless everything downloaded and verified.
//
// Without an id in from it restores as a local start does: the newest
// checkpoint whose manifest and files verify. A newer one that does not (a
// garbled or planted manifest, a damaged or missing file) is skipped, with
// a line to w naming it and why, and the one before it tried. Any other
// failure (the network, credentials, the local disk) stops the restore. A
// checkpoint named by its id must verify.
//
// Progress: with bar set (standard output is a terminal) each file gets a
// progress bar redrawn in place; otherwise a line per file and second.
//
// It stages the downloads in data_dir/restore.tmp, first removing one that
// an interrupted restore left (Run removes one too), and removes it, with
// a sync of data_dir, once the manifest is in the store.
func RestoreFromS3(ctx context.Context, cfgPath, from string, log *slog.Logger, w func(string), bar func(string)) (uint64, error) {
	return restoreFromS3(ctx, vfs.Default, cfgPath, from, log, w, bar)
}

// restoreFromS3 is RestoreFromS3 writing data_dir through fsys.
func restoreFromS3(ctx context.Context, fsys vfs.FS, cfgPath, from string, log *slog.Logger, w func(string), bar func(string)) (uint64, error) {
	cfg, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		return 0, errors.New("invalid configuration:\n" + strings.TrimRight(config.FormatDiagnostics(diags), "\n"))
	}
	loc, err := ParseS3(from)
	if err != nil {
		return 0, err
	}
	var lastReport time.Time
	client, err := uploadClient(cfg, fsys, loc.Bucket, loc.Prefix, log, func(p upload.Progress) {
		if bar != nil {
			bar(progressBar(p))
			return
		}
		if time.Since(lastReport) > time.Second || p.Done == p.Total {
			lastReport = time.Now()
			w(fmt.Sprintf("  %s %s: %d/%d bytes", p.Op, p.Name, p.Done, p.Total))
		}
	})
	if err != nil {
		return 0, err
	}
	defer client.Close()
	rf := remoteFetch{fsys: fsys, client: client, dataDir: cfg.Agent.DataDir, where: fmt.Sprintf("s3://%s/%s", loc.Bucket, loc.Prefix), w: w,
		skipped: func(sk checkpoint.Skipped) {
			w(fmt.Sprintf("checkpoint %d skipped: it does not verify: %v", sk.ID, sk.Reason))
		}}
	return rf.restore(ctx, loc.ID)
}

// remoteFetch downloads uploaded checkpoints into a data_dir's checkpoint
// store: `eddy restore --from s3://…`, and a start that finds no local
// checkpoint that verifies.
type remoteFetch struct {
	fsys    vfs.FS
	client  *upload.Client
	dataDir string
	// where is the bucket and prefix, s3://bucket/prefix/, for messages.
	where string
	// w receives progress lines.
	w func(string)
	// skipped is told of each uploaded checkpoint passed over, and why.
	skipped func(checkpoint.Skipped)
}

// restore fetches checkpoint id (which must verify), or with id 0 the
// newest one that verifies, and returns its id. Skipped checkpoints go to
// r.skipped; with none left it returns an error wrapping
// checkpoint.ErrNoCheckpoint.
func (r remoteFetch) restore(ctx context.Context, id uint64) (uint64, error) {
	if removed, err := removeRestoreStaging(r.fsys, r.dataDir); err != nil {
		return 0, err
	} else if removed {
		r.w("removed the staging directory of an interrupted restore")
	}
	names, err := r.client.ListManifests(ctx)
	if err != nil {
		return 0, err
	}
	if id != 0 {
		name := manifestObject(id)
		if !slices.Contains(names, name) {
			return 0, fmt.Errorf("checkpoint %d is not in %s", id, r.where)
		}
		return r.fetch(ctx, name, id)
	}
	var skipped []checkpoint.Skipped
	for i := len(names) - 1; i >= 0; i-- { // names sort as ids do
		id, ok := remoteManifestID(names[i])
		if !ok {
			continue // not a manifest the agent wrote
		}
		got, err := r.fetch(ctx, names[i], id)
		if err == nil {
			return got, nil
		}
		if !remoteCorruption(err) {
			return 0, err
		}
		sk := checkpoint.Skipped{ID: id, Reason: err}
		skipped = append(skipped, sk)
		if r.skipped != nil {
			r.skipped(sk)
		}
	}
	if _, err := removeRestoreStaging(r.fsys, r.dataDir); err != nil {
		return 0, err
	}
	if len(skipped) > 0 {
		return 0, fmt.Errorf("%w in %s: all %d checkpoints there fail to verify (newest: %v)",
			checkpoint.ErrNoCheckpoint, r.where, len(skipped), skipped[0].Reason)
	}
	return 0, fmt.Errorf("%w in %s: it holds no manifest", checkpoint.ErrNoCheckpoint, r.where)
}

// remoteManifestID parses a manifest object's name, "<20-digit id>.json".
func remoteManifestID(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, ".json")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	id, err := strconv.ParseUint(digits, 10, 64)
	return id, err == nil && id > 0
}

// remoteCorruption reports whether err is an uploaded checkpoint's own
// fault (a damaged, tampered, foreign or missing object, a manifest that
// does not parse), for which an older one is tried, rather than the
// network's, the credentials' or the local disk's, which would fail an
// older one too.
func remoteCorruption(err error) bool {
	return errors.Is(err, upload.ErrCorrupt) || errors.Is(err, upload.ErrWrongKey) ||
		errors.Is(err, upload.ErrNotFound) || checkpoint.IsCorruption(err)
}

// fetch downloads manifest object name (checkpoint id) and its files into
// the store, verifying each, and returns id.
func (r remoteFetch) fetch(ctx context.Context, name string, id uint64) (uint64, error) {
	data, err := r.client.GetManifest(ctx, name)
	if err != nil {
		return 0, err
	}
	m, err := checkpoint.UnmarshalManifest(data)
	if err != nil {
		return 0, fmt.Errorf("manifest %s: %w", name, err)
	}
	if m.ID != id {
		return 0, fmt.Errorf("manifest %s holds checkpoint %d: %w", name, m.ID, upload.ErrCorrupt)
	}
	r.w(fmt.Sprintf("restoring checkpoint %d (%s, %d files, %d bytes) from %s", m.ID, m.Kind, len(m.Files), m.FullSize(), r.where))
	root := filepath.Join(r.dataDir, "checkpoints")
	staging := filepath.Join(r.dataDir, restoreStagingDir)
	// Synced: it may create data_dir itself (a replaced device), whose
	// entry must outlive a power cut before the store inside it matters.
	if err := vfs.MkdirAllSynced(r.fsys, filepath.Join(staging, "files"), 0o750); err != nil {
		return 0, err
	}
	// Content-addressed: two tasks with identical snapshots share a file.
	var files []checkpoint.FileRef
	seen := map[string]bool{}
	for _, f := range m.Files {
		if !seen[f.Name] {
			seen[f.Name] = true
			files = append(files, f)
		}
	}
	for _, f := range files {
		if err := r.client.GetFileRef(ctx, upload.FileRef{Name: path.Base(f.Name), LocalPath: filepath.Join(staging, f.Name), SHA256: f.SHA256, Size: f.Size}); err != nil {
			return 0, err
		}
	}
	// Everything verified: move it into the store, the manifest last, so
	// a crash here leaves at worst unreferenced files.
	for _, sub := range []string{"files", "manifests"} {
		if err := vfs.MkdirAllSynced(r.fsys, filepath.Join(root, sub), 0o750); err != nil {
			return 0, err
		}
	}
	for _, f := range files {
		if err := r.fsys.Rename(filepath.Join(staging, f.Name), filepath.Join(root, f.Name)); err != nil {
			return 0, err
		}
	}
	// The renamed files' new entries must be durable before the manifest
	// that references them is.
	if err := r.fsys.SyncDir(filepath.Join(root, "files")); err != nil {
		return 0, err
	}
	store, err := checkpoint.OpenStore(r.fsys, root)
	if err != nil {
		return 0, err
	}
	if _, err := store.ReadManifest(m.ID); err == nil {
		r.w(fmt.Sprintf("checkpoint %d is already in %s", m.ID, root))
	} else if err := r.replaceManifest(store, root, m, err); err != nil {
		return 0, err
	}
	if _, err := removeRestoreStaging(r.fsys, r.dataDir); err != nil {
		return 0, err
	}
	if _, err := store.SelectRestore(strconv.FormatUint(m.ID, 10)); err != nil {
		return 0, fmt.Errorf("downloaded checkpoint %d does not verify: %w", m.ID, err)
	}
	return m.ID, nil
}

// replaceManifest writes m into store, replacing a local manifest of the
// same id that does not read (readErr, a corruption): the uploaded copy
// of a damaged local checkpoint takes its place.
func (r remoteFetch) replaceManifest(store *checkpoint.Store, root string, m *checkpoint.Manifest, readErr error) error {
	if checkpoint.IsCorruption(readErr) {
		p := filepath.Join(root, "manifests", manifestObject(m.ID))
		if err := r.fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return store.WriteManifest(m)
}

// checkpointSummary is one line of `eddy checkpoints ls`.
type checkpointSummary struct {
	ID       uint64 `json:"id"`
	Time     string `json:"time"`
	Kind     string `json:"kind"`
	Bytes    int64  `json:"bytes"`
	Chain    int64  `json:"chain_bytes"`
	Duration int64  `json:"duration_ms"`
	Align    int64  `json:"alignment_ms"`
	Files    int    `json:"files"`
}

func summarize(m *checkpoint.Manifest) checkpointSummary {
	return checkpointSummary{ID: m.ID, Time: m.Time.UTC().Format(time.RFC3339), Kind: m.Kind.String(), Bytes: m.Size(),
		Chain: m.FullSize(), Duration: m.DurationMs, Align: m.AlignmentMs, Files: len(m.Files)}
}

// ListCheckpoints prints the checkpoints of the configuration's data_dir, or
// of its S3 bucket with remote.
func ListCheckpoints(ctx context.Context, cfgPath string, remote bool, log *slog.Logger, w func(string)) error {
	cfg, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		return errors.New("invalid configuration:\n" + strings.TrimRight(config.FormatDiagnostics(diags), "\n"))
	}
	var ms []*checkpoint.Manifest
	if remote {
		client, err := uploadClient(cfg, vfs.Default, "", "", log, nil)
		if err != nil {
			return err
		}
		defer client.Close()
		names, err := client.ListManifests(ctx)
		if err != nil {
			return err
		}
		for _, n := range names {
			data, err := client.GetManifest(ctx, n)
			if err != nil {
				return err
			}
			m, err := checkpoint.UnmarshalManifest(data)
			if err != nil {
				w(fmt.Sprintf("%s: unreadable: %v", n, err))
				continue
			}
			ms = append(ms, m)
		}
	} else {
		store, err := checkpoint.OpenStore(vfs.Default, filepath.Join(cfg.Agent.DataDir, "checkpoints"))
		if err != nil {
			return err
		}
		ids, err := store.ManifestIDs()
		if err != nil {
			return err
		}
		for _, id := range ids {
			m, err := store.ReadManifest(id)
			if err != nil {
				w(fmt.Sprintf("%d: unreadable: %v", id, err))
				continue
			}
			ms = append(ms, m)
		}
	}
	w(fmt.Sprintf("%-6s  %-20s  %-11s  %10s  %10s  %8s  %8s  %5s", "ID", "TIME", "KIND", "BYTES", "CHAIN", "DURATION", "ALIGN", "FILES"))
	for _, m := range ms {
		s := summarize(m)
		w(fmt.Sprintf("%-6d  %-20s  %-11s  %10d  %10d  %6dms  %6dms  %5d", s.ID, s.Time, s.Kind, s.Bytes, s.Chain, s.Duration, s.Align, s.Files))
	}
	return nil
}

// ShowCheckpoint prints one local checkpoint's manifest as JSON.
func ShowCheckpoint(cfgPath string, id uint64, w func(string)) error {
	cfg, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		return errors.New("invalid configuration:\n" + strings.TrimRight(config.FormatDiagnostics(diags), "\n"))
	}
	store, err := checkpoint.OpenStore(vfs.Default, filepath.Join(cfg.Agent.DataDir, "checkpoints"))
	if err != nil {
		return err
	}
	m, err := store.ReadManifest(id)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(struct {
		checkpointSummary
		Manifest *checkpoint.Manifest `json:"manifest"`
	}{summarize(m), m}, "", "  ")
	if err != nil {
		return err
	}
	w(string(b))
	return nil
}

// RequestSavepoint asks the agent running with the configuration at cfgPath
// to take a savepoint, through its admin endpoint, and returns its id.
func RequestSavepoint(ctx context.Context, cfgPath string) (uint64, error) {
	cfg, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		return 0, errors.New("invalid configuration:\n" + strings.TrimRight(config.FormatDiagnostics(diags), "\n"))
	}
	if cfg.Agent.Admin == "" {
		return 0, errors.New("the agent has no admin endpoint (agent { admin = \"127.0.0.1:8787\" })")
	}
	client, scheme, err := adminClient(cfg.Agent.AdminTLS)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+"://"+cfg.Agent.Admin+"/api/savepoint", nil)
	if err != nil {
		return 0, err
	}
	if cfg.Agent.AdminToken != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Agent.AdminToken)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("is the agent running? %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		ID    uint64 `json:"id"`
		Error string `json:"error"`
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &body)
	if resp.StatusCode != http.StatusOK {
		msg := body.Error
		if msg == "" {
			msg = strings.TrimSpace(string(raw))
		}
		return 0, fmt.Errorf("%s: %s", resp.Status, msg)
	}
	return body.ID, nil
}

// progressBar draws one transfer as "\r  download ab12…: [#####     ] 50% 3.0/6.0 MiB",
// ending with a newline when the transfer is done.
func progressBar(p upload.Progress) string {
	const width = 30
	frac := 1.0
	if p.Total > 0 {
		frac = float64(p.Done) / float64(p.Total)
	}
	n := int(frac * width)
	name := p.Name
	if len(name) > 12 {
		name = name[:12] + "…"
	}
	line := fmt.Sprintf("\r  %s %s: [%s%s] %3.0f%% %.1f/%.1f MiB", p.Op, name, strings.Repeat("#", n), strings.Repeat(" ", width-n),
		frac*100, float64(p.Done)/(1<<20), float64(p.Total)/(1<<20))
	if p.Done >= p.Total {
		line += "\n"
	}
	return line
}
