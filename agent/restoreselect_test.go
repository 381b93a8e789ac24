package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/agent/offsite"
	"github.com/eddy-edge/eddy/agent/offsite/offsitetest"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/io/ingest"
	"github.com/eddy-edge/eddy/scripts/s3server"
	"github.com/eddy-edge/eddy/state/vfs"
	"github.com/eddy-edge/eddy/upload"
)

// s3Fixture is the shared bucket and a configuration (device d1,
// data_dir under the test's directory) whose upload block points at it.
type s3Fixture struct {
	*offsitetest.Bucket
	dir string
	cfg *config.Config
}

func newS3Fixture(t *testing.T) *s3Fixture {
	t.Helper()
	f := &s3Fixture{dir: t.TempDir()}
	f.Bucket = offsitetest.Start(t, func(s3 *s3server.Server) (*upload.Client, error) {
		cfgPath := filepath.Join(f.dir, "eddy.hcl")
		text := strings.NewReplacer("%DATA%", filepath.Join(f.dir, "data"), "%AGENT%", "").Replace(preflightBase+preflightPipeline) +
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
			return nil, err
		}
		cfg, diags := config.Load(cfgPath)
		if diags.HasErrors() {
			return nil, errors.New(config.FormatDiagnostics(diags))
		}
		f.cfg = cfg
		return offsite.NewClient(offsite.Target{Upload: cfg.Upload, DeviceID: cfg.Agent.DeviceID, Bucket: "eddy", Prefix: offsitetest.Device + "/"},
			vfs.Default, slog.New(slog.DiscardHandler), nil)
	})
	return f
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
	shipped := []*checkpoint.Manifest{offsitetest.WriteCheckpoint(t, src, 1, "one"), offsitetest.WriteCheckpoint(t, src, 2, "two")}
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
			f.Empty(t)
			if tc.uploaded {
				for _, m := range shipped {
					f.Ship(t, src, m)
				}
			}
			if tc.down {
				f.Server.Stop()
				defer f.Server.Restart()
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
				m := offsitetest.WriteCheckpoint(t, store, uint64(id), []string{"", "one", "two"}[id])
				if tc.corrupt {
					offsitetest.FlipByte(t, filepath.Join(store.Dir(), m.Files[0].Name))
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

// TestDecideEmptyStart: with no local checkpoint to restore, a start with
// no trace of earlier state starts empty; one after skipped checkpoints or
// a trimmed ingest log fetches an uploaded checkpoint when it can, and
// otherwise starts empty only when replaying the logs rebuilds the state,
// or when --allow-non-restored-state accepts the loss.
func TestDecideEmptyStart(t *testing.T) {
	trimmed := []string{"sensors from offset 51201"}
	for _, c := range []struct {
		skipped         bool
		trimmed         []string
		canFetch, allow bool
		want            emptyStart
	}{
		{false, nil, true, false, emptyFresh},
		{true, nil, true, false, emptyFetch},
		{false, trimmed, true, false, emptyFetch},
		{true, nil, false, false, emptyReplay},
		{true, trimmed, false, true, emptyDrop},
		{false, trimmed, false, false, emptyRefuse},
	} {
		if got := decideEmptyStart(c.skipped, c.trimmed, c.canFetch, c.allow); got != c.want {
			t.Errorf("decideEmptyStart(%v, %v, %v, %v) = %d, want %d", c.skipped, c.trimmed, c.canFetch, c.allow, got, c.want)
		}
	}
}
