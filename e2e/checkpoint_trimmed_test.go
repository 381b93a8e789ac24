package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/s3server"
)

// trimmedConfig is mqttCrashConfig with an ingest log of 2 MiB in segments
// of 512 KiB (about 5,000 readings each), so that checkpoints trim it
// within a few thousand readings, and %UPLOAD% after the checkpoint block.
var trimmedConfig = replaceAll(mqttCrashConfig,
	`checkpoint { interval = "200ms" }`, `ingest {
  max_disk    = "2MiB"
  compression = "none"
}
checkpoint { interval = "200ms" }
%UPLOAD%`)

// trimmedUpload is the upload block of trimmedConfig for the S3 server at
// %S3%; the device's prefix is crash/.
const trimmedUpload = `upload "s3" {
  endpoint      = "%S3%"
  bucket        = "eddy"
  secure        = false
  path_style    = true
  create_bucket = true
  access_key    = "%AK%"
  secret_key    = "%SK%"
}`

// TestCorrupt_TrimmedLogRefusesEmptyStart: an agent reading MQTT has
// taken checkpoints and trimmed its ingest log below them; it is killed
// and every file of its local checkpoints damaged. Starting empty would
// lose the state of the readings the log dropped: without uploads the
// agent refuses to start, with one error line naming the ways out and a
// non-zero exit; with uploads it restores the newest uploaded checkpoint
// instead, and the windows that span the kill come out exactly as in an
// uninterrupted run.
func TestCorrupt_TrimmedLogRefusesEmptyStart(t *testing.T) {
	t.Parallel()
	for _, uploads := range []bool{false, true} {
		name := "no upload"
		if uploads {
			name = "uploaded"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const first, total = 12_000, 20_000
			client := "eddy-trimmed-" + strings.ReplaceAll(name, " ", "-")
			g := readingGen{devices: 100, stepUs: 5000}
			b := startFaultBroker(t)
			upload := ""
			var s3 *s3server.Server
			if uploads {
				s3 = s3server.Start(t)
				upload = replaceAll(trimmedUpload, "%S3%", s3.Endpoint(), "%AK%", s3.AccessKey, "%SK%", s3.SecretKey)
			}
			run := newCrashRun(t, trimmedConfig, "%UPLOAD%", upload, "%BROKER%", b.URL(), "%CLIENT%", client)
			data := filepath.Join(run.dir, "data")
			run.start()
			g.publish(t, b, 0, first, 4000)
			waitAcked(t, b, client, first, 60*time.Second)
			// Checkpoints have trimmed the log: its first reading is gone.
			await.True(t, 60*time.Second, `oldestLogged(t, data) > 1`, func() bool { return oldestLogged(t, data) > 1 })
			if uploads {
				remote := filepath.Join(s3.Dir, "eddy", "crash", "manifests", "*.json")
				await.True(t, 60*time.Second, `len(names) > 0`, func() bool {
					names, _ := filepath.Glob(remote)
					return len(names) > 0
				})
			}
			run.kill()
			files, _ := filepath.Glob(filepath.Join(data, "checkpoints", "files", "*.snap"))
			if len(files) == 0 {
				t.Fatal("no checkpoint files")
			}
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				b[len(b)/2] ^= 0x40
				if err := os.WriteFile(f, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}

			// validate decides as run does, reading data_dir only.
			vout, verr, vcode := runSplit(t, "validate", "-c", run.cfg)
			if !uploads {
				if vcode != 1 || !strings.Contains(vout, "refusing to start empty") || !strings.Contains(vout, "eddy restore --from s3://") {
					t.Fatalf("validate over a trimmed log without a checkpoint: exit %d\n%s%s", vcode, vout, verr)
				}
				p := startEddy(t, "run", "-c", run.cfg)
				await.True(t, 60*time.Second, `p.exited() || p.logContains("eddy started")`, func() bool { return p.exited() || p.logContains("eddy started") })
				if !p.exited() {
					t.Fatal("the agent started empty over a trimmed ingest log")
				}
				out, err := p.output(), p.err
				if err == nil {
					t.Fatal("the agent exited with status 0")
				}
				var errs []string
				for _, l := range strings.Split(out, "\n") {
					if strings.Contains(l, "level=ERROR") {
						errs = append(errs, l)
					}
				}
				if len(errs) != 1 || !strings.Contains(errs[0], "--allow-non-restored-state") || !strings.Contains(errs[0], "eddy restore --from s3://") {
					t.Fatalf("want one error line naming --allow-non-restored-state and eddy restore --from s3://, got %d:\n%s", len(errs), strings.Join(errs, "\n"))
				}
				lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
				if last := lines[len(lines)-1]; last != strings.TrimRight(verr, "\n") {
					t.Fatalf("run's last line\n%s\nis not validate's\n%s", last, verr)
				}
				return
			}
			if vcode != 0 || !strings.Contains(vout, "eddy run fetches the newest uploaded one that does") {
				t.Fatalf("validate over a trimmed log with uploads: exit %d\n%s%s", vcode, vout, verr)
			}
			run.start()
			if !run.p.waitLog("restored checkpoint", 30*time.Second) || !run.p.logContains("fetched the newest uploaded checkpoint") {
				t.Fatal("the restart did not restore the uploaded checkpoint")
			}
			g.publish(t, b, first, total, 4000)
			b.Publish(g.flush(total))
			want := g.expected(total)
			got := withoutFlush(run.finalResults(len(want)))
			sameWindows(t, want, got, 1)
		})
	}
}
