package agent

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/scripts/s3server"
	"github.com/eddy-edge/eddy/state/vfs"
	"github.com/eddy-edge/eddy/upload"
)

// plantStaging leaves what an interrupted restore leaves in dataDir: the
// staging directory with a partial download in it.
func plantStaging(t *testing.T, fsys vfs.FS, dataDir string) {
	t.Helper()
	files := filepath.Join(dataDir, restoreStagingDir, "files")
	if err := vfs.MkdirAllSynced(fsys, files, 0o750); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create(filepath.Join(files, "t0-1.snap.partial"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("half a download")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(files); err != nil {
		t.Fatal(err)
	}
}

func stagingGone(t *testing.T, fsys vfs.FS, dataDir string) {
	t.Helper()
	if _, err := fsys.Stat(filepath.Join(dataDir, restoreStagingDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s after removal: %v", restoreStagingDir, err)
	}
}

// TestRestoreFromS3_RemovesLeftoverStaging: a restore from S3 (versitygw)
// into a data_dir holding an interrupted restore's staging directory
// removes it first, restores the checkpoint, and leaves no staging
// directory, durably: a power cut right after the restore returned
// (MemFS's crash image) shows the checkpoint and no staging directory,
// also when the restore created data_dir (a fresh device). Every file of the restore goes
// through the FS it is given: nothing appears on the real disk.
func TestRestoreFromS3_RemovesLeftoverStaging(t *testing.T) {
	s3 := s3server.Start(t)
	s3.MakeBucket("eddy")
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfgPath := filepath.Join(dir, "eddy.hcl")
	text := strings.NewReplacer("%DATA%", dataDir, "%AGENT%", "").Replace(preflightBase+preflightPipeline) +
		`upload "s3" {
  endpoint   = "` + s3.Endpoint() + `"
  bucket     = "eddy"
  secure     = false
  path_style = true
  access_key = "` + s3.AccessKey + `"
  secret_key = "` + s3.SecretKey + `"
}
`
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		t.Fatal(config.FormatDiagnostics(diags))
	}

	// A checkpoint in the bucket, as the agent ships one.
	src, err := checkpoint.OpenStore(vfs.Default, filepath.Join(dir, "src"))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := src.WriteSnapshot("t0", "p", checkpoint.KindFull, 1, func(fn func(bucket, key, value []byte, deleted bool) error) error {
		return fn([]byte("b"), []byte("k"), []byte("v"), false)
	})
	if err != nil {
		t.Fatal(err)
	}
	m := &checkpoint.Manifest{FormatVersion: checkpoint.ManifestVersion, ID: 1, Time: time.Unix(1, 0).UTC(),
		Kind: checkpoint.KindFull, Files: []checkpoint.FileRef{ref}}
	data, err := checkpoint.MarshalManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	client, err := newUploadClient(cfg, vfs.Default, "eddy", "gw-1/", slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	if err := client.PutFileRef(ctx, upload.FileRef{Name: path.Base(ref.Name), LocalPath: filepath.Join(src.Dir(), ref.Name),
		SHA256: ref.SHA256, Size: ref.Size}); err != nil {
		t.Fatal(err)
	}
	if err := client.PutManifest(ctx, manifestObject(1), data); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		leftover bool
	}{
		{"leftover staging", true},
		{"fresh device", false}, // restore creates data_dir
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk := vfs.NewCrashableMem()
			if tc.leftover {
				plantStaging(t, disk, dataDir)
			}
			var out []string
			id, err := restoreFromS3(ctx, disk, cfgPath, "s3://eddy/gw-1/", slog.New(slog.DiscardHandler),
				func(s string) { out = append(out, s) }, nil)
			if err != nil {
				t.Fatalf("restore: %v\n%s", err, strings.Join(out, "\n"))
			}
			if id != 1 {
				t.Fatalf("restored checkpoint %d, want 1", id)
			}
			const removed = "removed the staging directory of an interrupted restore"
			if got := strings.Contains(strings.Join(out, "\n"), removed); got != tc.leftover {
				t.Errorf("restore reported %q: %v, want %v:\n%s", removed, got, tc.leftover, strings.Join(out, "\n"))
			}
			afterCut := disk.CrashClone(vfs.CrashOptions{})
			for name, fsys := range map[string]vfs.FS{"now": disk, "after a power cut": afterCut} {
				stagingGone(t, fsys, dataDir)
				store, err := checkpoint.OpenStore(fsys, filepath.Join(dataDir, "checkpoints"))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if _, err := store.SelectRestore("1"); err != nil {
					t.Fatalf("%s: restored checkpoint: %v", name, err)
				}
			}
		})
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the restore wrote to the real disk (stat %s: %v)", dataDir, err)
	}
}

// TestOpenDataDir_RemovesLeftoverStaging: `eddy run` opening its data_dir
// removes an interrupted restore's staging directory and logs one line;
// without one it logs nothing about it.
func TestOpenDataDir_RemovesLeftoverStaging(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dataDir, dataDirMode); err != nil {
		t.Fatal(err)
	}
	plantStaging(t, vfs.Default, dataDir)
	const line = "removed an interrupted restore's staging directory"
	for i, want := range []int{1, 0} { // the second open finds none
		var logs bytes.Buffer
		if err := openDataDir(dataDir, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatal(err)
		}
		stagingGone(t, vfs.Default, dataDir)
		if got := strings.Count(logs.String(), line); got != want {
			t.Errorf("open %d: %d log lines %q, want %d:\n%s", i+1, got, line, want, logs.String())
		}
	}
}
