package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/io/ingest"
	"github.com/eddy-edge/eddy/scripts/s3server"
	"github.com/eddy-edge/eddy/state/vfs"
	"github.com/eddy-edge/eddy/upload"
)

// s3Fixture is a versitygw server with bucket "eddy" and a configuration
// (device d1, data_dir under the test's directory) whose upload block
// points at it.
type s3Fixture struct {
	s3      *s3server.Server
	dir     string
	dataDir string
	cfgPath string
	cfg     *config.Config
	client  *upload.Client // prefix d1/, the device's
}

func newS3Fixture(t *testing.T) *s3Fixture {
	t.Helper()
	s3 := s3server.Start(t)
	s3.MakeBucket("eddy")
	f := &s3Fixture{s3: s3, dir: t.TempDir()}
	f.dataDir = filepath.Join(f.dir, "data")
	f.cfgPath = filepath.Join(f.dir, "eddy.hcl")
	text := strings.NewReplacer("%DATA%", f.dataDir, "%AGENT%", "").Replace(preflightBase+preflightPipeline) +
		`upload "s3" {
  endpoint   = "` + s3.Endpoint() + `"
  bucket     = "eddy"
  secure     = false
  path_style = true
  access_key = "` + s3.AccessKey + `"
  secret_key = "` + s3.SecretKey + `"
}
`
	if err := os.WriteFile(f.cfgPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(f.cfgPath)
	if diags.HasErrors() {
		t.Fatal(config.FormatDiagnostics(diags))
	}
	f.cfg = cfg
	client, err := newUploadClient(cfg, vfs.Default, "eddy", "d1/", slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	f.client = client
	return f
}

// writeCheckpoint writes full checkpoint id, whose one snapshot holds
// key k = value, into store.
func writeCheckpoint(t *testing.T, store *checkpoint.Store, id uint64, value string) *checkpoint.Manifest {
	t.Helper()
	ref, err := store.WriteSnapshot("t0", "p", checkpoint.KindFull, id, func(fn func(bucket, key, value []byte, deleted bool) error) error {
		return fn([]byte("b"), []byte("k"), []byte(value), false)
	})
	if err != nil {
		t.Fatal(err)
	}
	m := &checkpoint.Manifest{FormatVersion: checkpoint.ManifestVersion, ID: id, Time: time.Unix(int64(id), 0).UTC(),
		Kind: checkpoint.KindFull, Files: []checkpoint.FileRef{ref}}
	if err := store.WriteManifest(m); err != nil {
		t.Fatal(err)
	}
	return m
}

// ship uploads checkpoint m of store as the agent does: files, then the
// manifest.
func (f *s3Fixture) ship(t *testing.T, store *checkpoint.Store, m *checkpoint.Manifest) {
	t.Helper()
	ctx := context.Background()
	for _, ref := range m.Files {
		if err := f.client.PutFileRef(ctx, upload.FileRef{Name: path.Base(ref.Name), LocalPath: filepath.Join(store.Dir(), ref.Name),
			SHA256: ref.SHA256, Size: ref.Size}); err != nil {
			t.Fatal(err)
		}
	}
	data, err := checkpoint.MarshalManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.client.PutManifest(ctx, manifestObject(m.ID), data); err != nil {
		t.Fatal(err)
	}
}

// object is the path of object key (below the device's prefix) in the
// server's backing directory.
func (f *s3Fixture) object(key string) string {
	return filepath.Join(f.s3.Dir, "eddy", "d1", filepath.FromSlash(key))
}

// empty removes every object below the device's prefix (an upload skips
// a file whose object exists, damaged or not).
func (f *s3Fixture) empty(t *testing.T) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(f.s3.Dir, "eddy", "d1")); err != nil {
		t.Fatal(err)
	}
}

// flipByte damages the file at p in its middle.
func flipByte(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
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
		ms = append(ms, writeCheckpoint(t, src, id, strings.Repeat("v", int(id)*1000)))
	}
	ctx := context.Background()
	manifestKey := func(id uint64) string { return "manifests/" + manifestObject(id) }
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
		{"garbled manifest", func(t *testing.T) { flipByte(t, f.object(manifestKey(3))) }, "s3://eddy/d1/", 2, []uint64{3}, "corrupt"},
		{"planted manifest", func(t *testing.T) {
			data, _ := checkpoint.MarshalManifest(ms[0])
			if err := f.client.PutManifest(ctx, manifestObject(3), data); err != nil {
				t.Fatal(err)
			}
		}, "s3://eddy/d1/", 2, []uint64{3}, "holds checkpoint 1"},
		{"not a manifest", func(t *testing.T) {
			if err := f.client.PutManifest(ctx, manifestObject(3), []byte("{not json")); err != nil {
				t.Fatal(err)
			}
		}, "s3://eddy/d1/", 2, []uint64{3}, "decode manifest"},
		{"damaged file", func(t *testing.T) { flipByte(t, f.object(fileKey(3))) }, "s3://eddy/d1/", 2, []uint64{3}, fileKey(3)},
		{"missing file", func(t *testing.T) {
			if err := os.Remove(f.object(fileKey(3))); err != nil {
				t.Fatal(err)
			}
		}, "s3://eddy/d1/", 2, []uint64{3}, "not found"},
		{"two damaged", func(t *testing.T) {
			flipByte(t, f.object(manifestKey(3)))
			flipByte(t, f.object(fileKey(2)))
		}, "s3://eddy/d1/", 1, []uint64{3, 2}, "corrupt"},
		{"named and damaged", func(t *testing.T) { flipByte(t, f.object(manifestKey(3))) }, "s3://eddy/d1/3", 0, nil, "corrupt"},
		{"named and absent", func(t *testing.T) {}, "s3://eddy/d1/9", 0, nil, "checkpoint 9 is not in s3://eddy/d1/"},
		{"empty prefix", func(t *testing.T) { f.empty(t) }, "s3://eddy/d1/", 0, nil, "holds no manifest"},
		{"all damaged", func(t *testing.T) {
			for id := uint64(1); id <= 3; id++ {
				flipByte(t, f.object(fileKey(id)))
			}
		}, "s3://eddy/d1/", 0, []uint64{3, 2, 1}, "no restorable checkpoint"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f.empty(t)
			for _, m := range ms {
				f.ship(t, src, m)
			}
			tc.damage(t)
			disk := vfs.NewCrashableMem()
			var out []string
			id, err := restoreFromS3(ctx, disk, f.cfgPath, tc.from, slog.New(slog.DiscardHandler),
				func(s string) { out = append(out, s) }, nil)
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
			if _, err := disk.Stat(filepath.Join(f.dataDir, restoreStagingDir)); err == nil {
				t.Errorf("%s left behind", restoreStagingDir)
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

// selectRestorer is a restorer with what selectRestore reads: the
// configuration and a logger into buf; and the sources, "s" reading an
// ingest log in dataDir that holds 200 readings, trimmed below offset
// trimBelow (0: not trimmed).
func selectRestorer(t *testing.T, cfg *config.Config, buf *bytes.Buffer, allow bool, trimBelow uint64) (*restorer, map[string]*sourceRunner) {
	t.Helper()
	l, err := ingest.Open(filepath.Join(cfg.Agent.DataDir, "ingest", "s"), ingest.Options{SegmentBytes: 4096, MaxDiskBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i := range 200 {
		if _, _, err := l.Append([]ingest.Entry{{Topic: []byte("t"), Payload: []byte(strings.Repeat("x", 100) + string(rune('a'+i%26)))}}); err != nil {
			t.Fatal(err)
		}
	}
	if trimBelow > 0 {
		if err := l.Truncate(trimBelow); err != nil {
			t.Fatal(err)
		}
		if l.FirstOffset() <= 1 {
			t.Fatal("the truncation kept offset 1")
		}
	}
	r := newSourceRunner("s", nil)
	r.ilog = l
	return &restorer{cfg: cfg, log: slog.New(slog.NewTextHandler(buf, nil)), allowNonRestored: allow},
		map[string]*sourceRunner{"s": r}
}

// TestSelectRestore_NoCheckpointVerifies: what a start does when no local
// checkpoint verifies, by whether the ingest log still reaches its start,
// whether checkpoints were uploaded, and --allow-non-restored-state. It
// never starts empty silently, and refuses to when that loses state.
func TestSelectRestore_NoCheckpointVerifies(t *testing.T) {
	f := newS3Fixture(t)
	src, err := checkpoint.OpenStore(vfs.Default, filepath.Join(f.dir, "src"))
	if err != nil {
		t.Fatal(err)
	}
	shipped := []*checkpoint.Manifest{writeCheckpoint(t, src, 1, "one"), writeCheckpoint(t, src, 2, "two")}
	cases := []struct {
		name     string
		local    int  // checkpoints 1..local in the local store
		corrupt  bool // every local one damaged
		trimmed  bool
		uploaded bool // checkpoints 1 and 2 in the bucket
		noUpload bool // the configuration has no upload block
		down     bool // the S3 server is down
		allow    bool
		want     uint64 // the checkpoint restored; 0: an empty start
		refused  bool
		log      string // what the log must say
		level    string // and at which level
	}{
		{"fresh device", 0, false, false, false, true, false, false, 0, false, "no checkpoint to restore: starting empty", "INFO"},
		{"good local, trimmed log", 2, false, true, false, true, false, false, 2, false, "", ""},
		{"corrupt, log intact", 2, true, false, false, true, false, false, 0, false, "every ingest log reaches back to its start", "WARN"},
		{"corrupt, trimmed", 2, true, true, false, true, false, false, 0, true, "--allow-non-restored-state", "ERROR"},
		{"none, trimmed", 0, false, true, false, true, false, false, 0, true, "eddy restore --from s3://", "ERROR"},
		{"corrupt, trimmed, allowed", 2, true, true, false, true, false, true, 0, false, "starting empty without the state", "WARN"},
		{"corrupt, trimmed, uploaded", 2, true, true, true, false, false, false, 2, false, "fetched the newest uploaded checkpoint", "WARN"},
		{"corrupt, trimmed, nothing uploaded", 2, true, true, false, false, false, false, 0, true, "--allow-non-restored-state", "ERROR"},
		{"corrupt, log intact, uploaded", 1, true, false, true, false, false, false, 2, false, "fetched the newest uploaded checkpoint", "WARN"},
		{"corrupt, trimmed, S3 down", 2, true, true, true, false, true, false, 0, true, "--allow-non-restored-state", "ERROR"},
		{"corrupt, log intact, S3 down", 2, true, false, true, false, true, false, 0, false, "no uploaded one could be fetched", "WARN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The bucket holds checkpoints 1 and 2, or nothing.
			f.empty(t)
			if tc.uploaded {
				for _, m := range shipped {
					f.ship(t, src, m)
				}
			}
			if tc.down {
				f.s3.Stop()
				defer f.s3.Restart()
			}
			cfg := *f.cfg
			cfg.Agent.DataDir = filepath.Join(t.TempDir(), "data")
			if tc.noUpload {
				cfg.Upload = nil
			}
			store, err := checkpoint.OpenStore(vfs.Default, filepath.Join(cfg.Agent.DataDir, "checkpoints"))
			if err != nil {
				t.Fatal(err)
			}
			for id := 1; id <= tc.local; id++ {
				m := writeCheckpoint(t, store, uint64(id), []string{"", "one", "two"}[id])
				if tc.corrupt {
					flipByte(t, filepath.Join(store.Dir(), m.Files[0].Name))
				}
			}
			var buf bytes.Buffer
			trim := uint64(0)
			if tc.trimmed {
				trim = 150
			}
			r, sources := selectRestorer(t, &cfg, &buf, tc.allow, trim)
			sel, err := r.selectRestore(context.Background(), store, sources)
			log := buf.String()
			switch {
			case tc.refused:
				if !errors.Is(err, errNotRestored) {
					t.Fatalf("selectRestore: %v, want errNotRestored\n%s", err, log)
				}
			case tc.want == 0:
				if !errors.Is(err, checkpoint.ErrNoCheckpoint) {
					t.Fatalf("selectRestore: %v, want an empty start\n%s", err, log)
				}
			default:
				if err != nil || sel.Manifest.ID != tc.want {
					t.Fatalf("selectRestore: %+v, %v; want checkpoint %d\n%s", sel.Manifest, err, tc.want, log)
				}
			}
			if n := strings.Count(log, "level=ERROR"); tc.refused && n != 1 || !tc.refused && n != 0 {
				t.Errorf("%d error lines, want %d:\n%s", n, map[bool]int{true: 1}[tc.refused], log)
			}
			if tc.log == "" {
				return
			}
			found := false
			for _, line := range strings.Split(log, "\n") {
				if strings.Contains(line, tc.log) {
					found = true
					if !strings.Contains(line, "level="+tc.level) {
						t.Errorf("%q logged at another level than %s: %s", tc.log, tc.level, line)
					}
				}
			}
			if !found {
				t.Errorf("the log does not say %q:\n%s", tc.log, log)
			}
		})
	}
}
