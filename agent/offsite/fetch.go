package offsite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/state/vfs"
	"github.com/eddy-edge/eddy/upload"
)

// RestoreFromS3 downloads a checkpoint (the newest that verifies, or
// loc.ID) and its files from t into dataDir's checkpoint store through
// fsys, verifying every checksum, so that the next `eddy run` restores it.
// loc is the address as the user gave it: messages name it; t is where the
// client goes (loc's bucket, and loc's prefix or the device's). It
// reports progress to w. Nothing in data_dir's checkpoint store changes
// unless everything downloaded and verified.
//
// Without an id in loc it restores as a local start does: the newest
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
func RestoreFromS3(ctx context.Context, fsys vfs.FS, t Target, loc S3Location, dataDir string, log *slog.Logger, w func(string), bar func(string)) (uint64, error) {
	var lastReport time.Time
	client, err := NewClient(t, fsys, log, func(p upload.Progress) {
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
	rf := remoteFetch{fsys: fsys, client: client, dataDir: dataDir, where: fmt.Sprintf("s3://%s/%s", loc.Bucket, loc.Prefix), w: w,
		skipped: func(sk checkpoint.Skipped) {
			w(fmt.Sprintf("checkpoint %d skipped: it does not verify: %v", sk.ID, sk.Reason))
		}}
	return rf.restore(ctx, loc.ID)
}

// checkTimeout bounds the check of the bucket before a start fetches
// uploaded checkpoints: an unreachable S3 server must not hold the start
// for long.
const checkTimeout = 15 * time.Second

// FetchNewest downloads the newest checkpoint in t (t.Prefix: this
// device's) that verifies into dataDir's checkpoint store, and returns its
// id: what a start does when no local checkpoint verifies. It checks the
// bucket first, for at most 15 seconds, so that an unreachable S3 server
// does not hold the start for long. Progress and the uploaded checkpoints
// it skips are logged to log; with none that verifies it returns an error
// wrapping checkpoint.ErrNoCheckpoint.
func FetchNewest(ctx context.Context, t Target, dataDir string, log *slog.Logger) (uint64, error) {
	client, err := NewClient(t, vfs.Default, log, nil)
	if err != nil {
		return 0, err
	}
	defer client.Close()
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	err = client.Check(cctx)
	cancel()
	if err != nil {
		return 0, err
	}
	where := "s3://" + t.Upload.Bucket + "/" + t.Prefix
	rf := remoteFetch{fsys: vfs.Default, client: client, dataDir: dataDir, where: where,
		w: func(line string) { log.Info("upload: " + strings.TrimSpace(line)) },
		skipped: func(sk checkpoint.Skipped) {
			log.Warn("uploaded checkpoint skipped: it does not verify", "id", sk.ID, "from", where, "reason", sk.Reason)
		}}
	return rf.restore(ctx, 0)
}

// Manifests reads every manifest in t, oldest first (`eddy checkpoints ls
// --remote`); one that does not decode is reported to w and left out.
func Manifests(ctx context.Context, t Target, log *slog.Logger, w func(string)) ([]*checkpoint.Manifest, error) {
	client, err := NewClient(t, vfs.Default, log, nil)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	names, err := client.ListManifests(ctx)
	if err != nil {
		return nil, err
	}
	var ms []*checkpoint.Manifest
	for _, n := range names {
		data, err := client.GetManifest(ctx, n)
		if err != nil {
			return nil, err
		}
		m, err := checkpoint.UnmarshalManifest(data)
		if err != nil {
			w(fmt.Sprintf("%s: unreadable: %v", n, err))
			continue
		}
		ms = append(ms, m)
	}
	return ms, nil
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
	if removed, err := RemoveStaging(r.fsys, r.dataDir); err != nil {
		return 0, err
	} else if removed {
		r.w("removed the staging directory of an interrupted restore")
	}
	names, err := r.client.ListManifests(ctx)
	if err != nil {
		return 0, err
	}
	if id != 0 {
		name := upload.ManifestObject(id)
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
	if _, err := RemoveStaging(r.fsys, r.dataDir); err != nil {
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
	staging := filepath.Join(r.dataDir, StagingDir)
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
	if _, err := RemoveStaging(r.fsys, r.dataDir); err != nil {
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
		p := filepath.Join(root, "manifests", upload.ManifestObject(m.ID))
		if err := r.fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return store.WriteManifest(m)
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
