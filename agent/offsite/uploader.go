package offsite

import (
	"context"
	"log/slog"
	"path"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/state/vfs"
	"github.com/eddy-edge/eddy/upload"
)

// Store is the local checkpoint store the Uploader ships from, read only
// (*checkpoint.Store is one).
type Store interface {
	// Dir is the store's directory; a manifest's file names are relative
	// to it.
	Dir() string
	// ManifestIDs lists the ids of the store's manifests, oldest first.
	ManifestIDs() ([]uint64, error)
	// ReadManifest reads manifest id from the store.
	ReadManifest(id uint64) (*checkpoint.Manifest, error)
}

// Checkpointer is the two hooks the Uploader needs into what completes
// checkpoints and applies local retention (the agent's
// checkpointing.Driver is one).
type Checkpointer interface {
	// OnCompleted registers fn, told of every checkpoint completed from
	// now on (on the checkpointer's goroutine, after its manifest is
	// durable).
	OnCompleted(fn func(checkpoint.Completed))
	// KeepUnshipped installs fn, which local retention asks how many of
	// the newest checkpoints to keep at least.
	KeepUnshipped(fn func() int)
}

// Uploader ships completed checkpoints to S3 (the upload block) in the
// background: files first, the manifest last, retrying while the uplink is
// down; it never blocks processing or checkpointing. Remote retention
// mirrors the local one, and local retention keeps what is not shipped yet
// (within a budget). The zero value is ready for Start; Stats and Flush
// may be called without one.
type Uploader struct {
	log *slog.Logger
	// shipper is set by Start, before the run's goroutines read it; nil
	// without a Start.
	shipper *upload.Shipper
	// seen publishes shipper to the admin endpoint, which starts first
	// (Start may wait for the S3 server).
	seen atomic.Pointer[upload.Shipper]
}

// Stats are the shipper's figures; nil before Start (which the agent
// never calls without an upload block). Safe for concurrent use.
func (u *Uploader) Stats() *upload.Stats {
	ship := u.seen.Load()
	if ship == nil {
		return nil
	}
	st := ship.Stats()
	return &st
}

// Start ships to t every checkpoint ck completes into store from now on,
// and the newest one already in store, until ctx ends, logging to log and
// registering the eddy_upload_* gauges in set. It returns an error only
// when the client cannot be built from t; a check of the bucket that fails
// is logged, not returned: checkpoints stay local and uploads retry.
// Call it once, before ck runs.
func (u *Uploader) Start(ctx context.Context, t Target, store Store, ck Checkpointer, set *metrics.Set, log *slog.Logger) error {
	u.log = log
	client, err := NewClient(t, vfs.Default, u.log, nil)
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
	registerMetrics(set, ship)
	go func() {
		defer client.Close()
		if err := ship.Run(ctx); err != nil && ctx.Err() == nil {
			u.log.Error("upload stopped", "err", err)
		}
	}()
	ck.OnCompleted(func(done checkpoint.Completed) { u.ship(store, done) })
	ck.KeepUnshipped(u.keepUnshipped(store))
	// The shipper's queue does not survive a restart: ship the newest local
	// checkpoint again (files already in the bucket are not re-sent).
	if ids, err := store.ManifestIDs(); err == nil && len(ids) > 0 {
		if m, err := store.ReadManifest(ids[len(ids)-1]); err == nil {
			u.ship(store, checkpoint.Completed{ID: m.ID, Kind: m.Kind, Manifest: m})
		}
	}
	return nil
}

// maxUnshipped bounds how many local checkpoints wait for their upload.
const maxUnshipped = 32

// keepUnshipped is local retention's floor: local checkpoints stay until
// uploaded (the newest uploaded one too), within a budget: past it the
// oldest unshipped give way, with a warning.
func (u *Uploader) keepUnshipped(store Store) func() int {
	return func() int {
		ids, err := store.ManifestIDs()
		if err != nil {
			return 0
		}
		last, _ := strconv.ParseUint(u.shipper.Stats().LastUploadedID, 10, 64)
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
}

// Flush gives the shipper a little time at shutdown to send the final
// checkpoint; what it cannot send is shipped at the next start. Without a
// Start it does nothing.
func (u *Uploader) Flush() {
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
func (u *Uploader) ship(store Store, done checkpoint.Completed) {
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
	u.shipper.Ship(strconv.FormatUint(m.ID, 10), upload.ManifestObject(m.ID), data, files)
	ids, err := store.ManifestIDs()
	if err != nil {
		return
	}
	var keep []string
	for _, id := range ids {
		keep = append(keep, upload.ManifestObject(id))
	}
	u.shipper.Retain(keep, referencedFiles)
}

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

func registerMetrics(set *metrics.Set, ship *upload.Shipper) {
	set.NewGauge("eddy_upload_pending_checkpoints", func() float64 { return float64(ship.Stats().Pending) })
	set.NewGauge("eddy_upload_bytes_total", func() float64 { return float64(ship.Stats().BytesUploaded) })
	set.NewGauge("eddy_upload_failures_total", func() float64 { return float64(ship.Stats().Failures) })
	set.NewGauge("eddy_upload_recovery_point_lag_seconds", func() float64 { return ship.Stats().RecoveryPointLag.Seconds() })
	set.NewGauge("eddy_upload_last_id", func() float64 {
		id, _ := strconv.ParseUint(ship.Stats().LastUploadedID, 10, 64)
		return float64(id)
	})
}
