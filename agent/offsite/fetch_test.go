package offsite

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/agent/offsite/offsitetest"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/scripts/s3server"
	"github.com/eddy-edge/eddy/state/vfs"
	"github.com/eddy-edge/eddy/upload"
)

// s3Fixture is the shared bucket, the upload block that points at it,
// and a data_dir to restore into.
type s3Fixture struct {
	*offsitetest.Bucket
	dir     string
	dataDir string
	target  Target // device d1's prefix, "d1/"
}

func newS3Fixture(t *testing.T) *s3Fixture {
	t.Helper()
	f := &s3Fixture{dir: t.TempDir()}
	f.dataDir = filepath.Join(f.dir, "data")
	f.Bucket = offsitetest.Start(t, func(s3 *s3server.Server) (*upload.Client, error) {
		f.target = Target{Upload: &config.Upload{Type: "s3", Endpoint: s3.Endpoint(), Bucket: "eddy", Prefix: "${device_id}/",
			PathStyle: true, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey}, DeviceID: offsitetest.Device, Prefix: offsitetest.Device + "/"}
		return NewClient(f.target, vfs.Default, slog.New(slog.DiscardHandler), nil)
	})
	return f
}

// restore is `eddy restore --from from` into the fixture's data_dir,
// written through fsys, with w receiving the progress lines.
func (f *s3Fixture) restore(ctx context.Context, fsys vfs.FS, from string, w func(string)) (uint64, error) {
	loc, err := ParseS3(from)
	if err != nil {
		return 0, err
	}
	t := f.target
	t.Bucket, t.Prefix = loc.Bucket, loc.Prefix
	return RestoreFromS3(ctx, fsys, t, loc, f.dataDir, slog.New(slog.DiscardHandler), w, nil)
}

// plantStaging leaves what an interrupted restore leaves in dataDir: the
// staging directory with a partial download in it.
func plantStaging(t *testing.T, fsys vfs.FS, dataDir string) {
	t.Helper()
	files := filepath.Join(dataDir, StagingDir, "files")
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
	if _, err := fsys.Stat(filepath.Join(dataDir, StagingDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s after removal: %v", StagingDir, err)
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
	f := newS3Fixture(t)
	// A checkpoint in the bucket, as the agent ships one.
	src, err := checkpoint.OpenStore(vfs.Default, filepath.Join(f.dir, "src"))
	if err != nil {
		t.Fatal(err)
	}
	f.Ship(t, src, offsitetest.WriteCheckpoint(t, src, 1, "v"))
	ctx := context.Background()

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
				plantStaging(t, disk, f.dataDir)
			}
			var out []string
			id, err := f.restore(ctx, disk, "s3://eddy/d1/", func(s string) { out = append(out, s) })
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
				stagingGone(t, fsys, f.dataDir)
				store, err := checkpoint.OpenStore(fsys, filepath.Join(f.dataDir, "checkpoints"))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if _, err := store.SelectRestore("1"); err != nil {
					t.Fatalf("%s: restored checkpoint: %v", name, err)
				}
			}
		})
	}
	if _, err := os.Stat(f.dataDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the restore wrote to the real disk (stat %s: %v)", f.dataDir, err)
	}
}

// TestRestoreFromS3_SkipsWhatDoesNotVerify: with checkpoints 1 to 3 in the
// bucket and the newest damaged in each way an object can be (a garbled or
// planted manifest, a manifest that is not one, a damaged or missing
// file), `eddy restore --from s3://…/d1/` restores checkpoint 2 and says
// that 3 was skipped and why; with 2 damaged too, checkpoint 1. Named by
// its id, a damaged checkpoint is an error, not a fallback; with every one
// damaged the restore fails.
func TestRestoreFromS3_SkipsWhatDoesNotVerify(t *testing.T) {
	f := newS3Fixture(t)
	src, err := checkpoint.OpenStore(vfs.Default, filepath.Join(f.dir, "src"))
	if err != nil {
		t.Fatal(err)
	}
	var ms []*checkpoint.Manifest
	for id := uint64(1); id <= 3; id++ {
		ms = append(ms, offsitetest.WriteCheckpoint(t, src, id, strings.Repeat("v", int(id)*1000)))
	}
	ctx := context.Background()
	manifestKey := func(id uint64) string { return "manifests/" + upload.ManifestObject(id) }
	fileKey := func(id uint64) string { return "files/" + path.Base(ms[id-1].Files[0].Name) }
	cases := []struct {
		name    string
		damage  func(t *testing.T)
		from    string
		want    uint64 // 0: the restore fails
		skipped []uint64
		reason  string // in the skip's line, or the error
	}{
		{"intact", func(t *testing.T) {}, "s3://eddy/d1/", 3, nil, ""},
		{"garbled manifest", func(t *testing.T) { offsitetest.FlipByte(t, f.Object(manifestKey(3))) }, "s3://eddy/d1/", 2, []uint64{3}, "corrupt"},
		{"planted manifest", func(t *testing.T) {
			data, _ := checkpoint.MarshalManifest(ms[0])
			if err := f.Client.PutManifest(ctx, upload.ManifestObject(3), data); err != nil {
				t.Fatal(err)
			}
		}, "s3://eddy/d1/", 2, []uint64{3}, "holds checkpoint 1"},
		{"not a manifest", func(t *testing.T) {
			if err := f.Client.PutManifest(ctx, upload.ManifestObject(3), []byte("{not json")); err != nil {
				t.Fatal(err)
			}
		}, "s3://eddy/d1/", 2, []uint64{3}, "decode manifest"},
		{"damaged file", func(t *testing.T) { offsitetest.FlipByte(t, f.Object(fileKey(3))) }, "s3://eddy/d1/", 2, []uint64{3}, fileKey(3)},
		{"missing file", func(t *testing.T) {
			if err := os.Remove(f.Object(fileKey(3))); err != nil {
				t.Fatal(err)
			}
		}, "s3://eddy/d1/", 2, []uint64{3}, "not found"},
		{"two damaged", func(t *testing.T) {
			offsitetest.FlipByte(t, f.Object(manifestKey(3)))
			offsitetest.FlipByte(t, f.Object(fileKey(2)))
		}, "s3://eddy/d1/", 1, []uint64{3, 2}, "corrupt"},
		{"named and damaged", func(t *testing.T) { offsitetest.FlipByte(t, f.Object(manifestKey(3))) }, "s3://eddy/d1/3", 0, nil, "corrupt"},
		{"named and absent", func(t *testing.T) {}, "s3://eddy/d1/9", 0, nil, "checkpoint 9 is not in s3://eddy/d1/"},
		{"empty prefix", func(t *testing.T) { f.Empty(t) }, "s3://eddy/d1/", 0, nil, "holds no manifest"},
		{"all damaged", func(t *testing.T) {
			for id := uint64(1); id <= 3; id++ {
				offsitetest.FlipByte(t, f.Object(fileKey(id)))
			}
		}, "s3://eddy/d1/", 0, []uint64{3, 2, 1}, "no restorable checkpoint"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f.Empty(t)
			for _, m := range ms {
				f.Ship(t, src, m)
			}
			tc.damage(t)
			disk := vfs.NewCrashableMem()
			var out []string
			id, err := f.restore(ctx, disk, tc.from, func(s string) { out = append(out, s) })
			text := strings.Join(out, "\n")
			if tc.want == 0 {
				if err == nil || !strings.Contains(err.Error(), tc.reason) {
					t.Fatalf("restore = %d, %v; want an error saying %q\n%s", id, err, tc.reason, text)
				}
			} else {
				if err != nil || id != tc.want {
					t.Fatalf("restore = %d, %v; want checkpoint %d\n%s", id, err, tc.want, text)
				}
				store, err := checkpoint.OpenStore(disk, filepath.Join(f.dataDir, "checkpoints"))
				if err != nil {
					t.Fatal(err)
				}
				if sel, err := store.SelectRestore(""); err != nil || sel.Manifest.ID != tc.want {
					t.Fatalf("local selection after the restore: %+v, %v", sel.Manifest, err)
				}
			}
			var skips []string
			for _, l := range out {
				if strings.Contains(l, "skipped") {
					skips = append(skips, l)
				}
			}
			if len(skips) != len(tc.skipped) {
				t.Fatalf("%d skip lines, want %d (checkpoints %v):\n%s", len(skips), len(tc.skipped), tc.skipped, text)
			}
			for i, id := range tc.skipped {
				if want := "checkpoint " + strconv.FormatUint(id, 10) + " skipped"; !strings.HasPrefix(skips[i], want) {
					t.Errorf("skip line %d: %q, want it to start %q", i, skips[i], want)
				}
			}
			if len(skips) > 0 && tc.want != 0 && !strings.Contains(skips[0], tc.reason) {
				t.Errorf("skip line %q does not say %q", skips[0], tc.reason)
			}
			if _, err := disk.Stat(filepath.Join(f.dataDir, StagingDir)); err == nil {
				t.Errorf("%s left behind", StagingDir)
			}
		})
	}
}

// TestRemoteManifestID: only the names the agent gives manifests are
// taken for checkpoints.
func TestRemoteManifestID(t *testing.T) {
	cases := []struct {
		name string
		id   uint64
		ok   bool
	}{
		{"00000000000000000042.json", 42, true},
		{"00000000000000000000.json", 0, false},
		{"42.json", 0, false},
		{"0000000000000000004x.json", 0, false},
		{"00000000000000000042.json.tmp", 0, false},
		{"zzzzzzzzzzzzzzzzzzzz.json", 0, false},
	}
	for _, c := range cases {
		if id, ok := remoteManifestID(c.name); id != c.id || ok != c.ok {
			t.Errorf("remoteManifestID(%q) = %d, %v; want %d, %v", c.name, id, ok, c.id, c.ok)
		}
	}
}

// TestRemoteCorruption: the faults of an uploaded checkpoint itself lead to
// the one before it; the network's, the credentials' and the disk's stop
// the restore.
func TestRemoteCorruption(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{&upload.ObjectError{Op: "get", Kind: upload.ErrCorrupt}, true},
		{&upload.ObjectError{Op: "get", Kind: upload.ErrWrongKey}, true},
		{&upload.ObjectError{Op: "get", Kind: upload.ErrNotFound}, true},
		{checkpoint.ErrCorrupt, true},
		{&upload.ObjectError{Op: "get", Kind: upload.ErrCredentials}, false},
		{&upload.ObjectError{Op: "get", Kind: upload.ErrAccessDenied}, false},
		{&upload.ObjectError{Op: "get", Err: context.DeadlineExceeded}, false},
		{os.ErrPermission, false},
	}
	for _, c := range cases {
		if got := remoteCorruption(c.err); got != c.want {
			t.Errorf("remoteCorruption(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestProgressBar(t *testing.T) {
	half := progressBar(upload.Progress{Op: "download", Name: "0123456789abcdef.snap", Done: 3 << 20, Total: 6 << 20})
	if !strings.HasPrefix(half, "\r  download 0123456789ab…: [###############               ]  50% 3.0/6.0 MiB") || strings.HasSuffix(half, "\n") {
		t.Fatalf("half: %q", half)
	}
	if done := progressBar(upload.Progress{Op: "download", Name: "x", Done: 10, Total: 10}); !strings.HasSuffix(done, "\n") || !strings.Contains(done, "100%") {
		t.Fatalf("done: %q", done)
	}
}
