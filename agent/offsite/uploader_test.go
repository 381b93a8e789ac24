package offsite

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/agent/offsite/offsitetest"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/state/vfs"
	"github.com/eddy-edge/eddy/upload"
)

// checkpointer records the hooks the Uploader installs, as the agent's
// checkpoint driver keeps them, and completes checkpoints into store.
type checkpointer struct {
	store         *checkpoint.Store
	mu            sync.Mutex
	completed     func(checkpoint.Completed)
	keepUnshipped func() int
}

func (c *checkpointer) OnCompleted(fn func(checkpoint.Completed)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.completed = fn
}

func (c *checkpointer) KeepUnshipped(fn func() int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keepUnshipped = fn
}

// complete writes checkpoint id into the store and tells the Uploader, as
// the checkpointer does once its manifest is durable.
func (c *checkpointer) complete(t *testing.T, id uint64) {
	t.Helper()
	m := offsitetest.WriteCheckpoint(t, c.store, id, strings.Repeat("v", int(id)))
	c.mu.Lock()
	fn := c.completed
	c.mu.Unlock()
	fn(checkpoint.Completed{ID: m.ID, Kind: m.Kind, Manifest: m})
}

// TestUploader_ShipsCompletedCheckpoints: Start ships the newest checkpoint
// already in the store, then every one completed after it, files and
// manifest, to the device's prefix; local retention keeps what is not
// uploaded yet (the newest uploaded one too); the eddy_upload_* gauges
// follow; Flush returns once the final one is shipped.
func TestUploader_ShipsCompletedCheckpoints(t *testing.T) {
	f := newS3Fixture(t)
	store, err := checkpoint.OpenStore(vfs.Default, filepath.Join(f.dataDir, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	ck := &checkpointer{store: store}
	offsitetest.WriteCheckpoint(t, store, 1, "old")
	offsitetest.WriteCheckpoint(t, store, 2, "newest before the start")
	var u Uploader
	if u.Stats() != nil {
		t.Fatal("Stats before Start: want nil")
	}
	set := metrics.NewSet()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := u.Start(ctx, f.target, store, ck, set, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	uploaded := func(id uint64) func() bool {
		return func() bool { st := u.Stats(); return st != nil && st.LastUploadedID == strconv.FormatUint(id, 10) }
	}
	await.True(t, 30*time.Second, "checkpoint 2 uploaded at the start", uploaded(2))
	if _, err := os.Stat(f.Object("manifests/" + upload.ManifestObject(1))); err == nil {
		t.Error("checkpoint 1, older than the newest at the start, was uploaded")
	}
	if n := ck.keepUnshipped(); n != 1 {
		t.Errorf("keep %d local checkpoints with everything uploaded, want 1 (the newest uploaded)", n)
	}

	ck.complete(t, 3)
	u.Flush()
	if !uploaded(3)() {
		t.Fatalf("after Flush: %+v, want checkpoint 3 uploaded", u.Stats())
	}
	for _, id := range []uint64{2, 3} {
		m, err := store.ReadManifest(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"manifests/" + upload.ManifestObject(id), "files/" + filepath.Base(m.Files[0].Name)} {
			if _, err := os.Stat(f.Object(key)); err != nil {
				t.Errorf("checkpoint %d: object %s: %v", id, key, err)
			}
		}
	}
	var buf bytes.Buffer
	set.WritePrometheus(&buf)
	if !strings.Contains(buf.String(), "eddy_upload_last_id 3\n") || !strings.Contains(buf.String(), "eddy_upload_pending_checkpoints 0\n") {
		t.Errorf("gauges:\n%s", buf.String())
	}

	// With the bucket gone, what completes stays local: retention keeps
	// it, and the newest uploaded one.
	f.Server.Stop()
	defer f.Server.Restart()
	ck.complete(t, 4)
	ck.complete(t, 5)
	if n := ck.keepUnshipped(); n != 3 {
		t.Errorf("keep %d local checkpoints with 2 not uploaded, want 3", n)
	}
}
