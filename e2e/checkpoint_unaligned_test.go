package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
)

// unalignedConfig is crashConfig through a deliberately slow window
// operator (%DELAY% per record), so the queues in front of it stay full and
// an aligned barrier waits behind them (about 3 s here); checkpoints time
// out after 2 s. %MODE% sets the checkpoints' alignment.
var unalignedConfig = replaceAll(crashConfig,
	`device_id   = "crash"`, `device_id   = "unaligned"`,
	"  to = [sink.file.out]\n}", "  to                     = [sink.file.out]\n  debug_delay_per_record = \"%DELAY%\"\n}",
	"checkpoint {\n  interval = \"100ms\"\n}", `checkpoint {
  interval           = "3s"
  timeout            = "2s"
  tolerable_failures = 1000
  %MODE%
}`)

func unalignedRun(t *testing.T, in, delay, mode string) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	b, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "in.jsonl"), b, 0o644)
	return dir, writeConfig(t, dir, unalignedConfig, "%DELAY%", delay, "%MODE%", mode)
}

var inflightRe = regexp.MustCompile(`checkpoint completed.*unaligned_tasks=([1-9][0-9]*) inflight_records=([0-9]+)`)

// unalignedWithRecords counts completed checkpoints taken unaligned that
// stored in-flight records.
func unalignedWithRecords(log string) int {
	n := 0
	for _, m := range inflightRe.FindAllStringSubmatch(log, -1) {
		if r, _ := strconv.Atoi(m[2]); r > 0 {
			n++
		}
	}
	return n
}

// TestUnaligned_SlowOperator: under backpressure from a slow operator,
// aligned checkpoints time out while unaligned ones (and aligned ones that
// switch after aligned_timeout) complete, storing the records their barrier
// overtook; killed with SIGKILL after such checkpoints and restarted, the
// agent replays those records and its committed output equals an
// uninterrupted run's.
func TestUnaligned_SlowOperator(t *testing.T) {
	src := filepath.Join(t.TempDir(), "in.jsonl")
	writeReadings(t, src, 1000, 30, 11)
	refDir, refPath := unalignedRun(t, src, "0s", "")
	if _, err := runEddy(t, "run", "-c", refPath); err != nil {
		t.Fatalf("uninterrupted run: %v", err)
	}
	want := committedRecords(t, filepath.Join(refDir, "out"))
	if len(want) == 0 {
		t.Fatal("the uninterrupted run committed nothing")
	}

	t.Run("aligned times out", func(t *testing.T) {
		_, path := unalignedRun(t, src, "1ms", "")
		p := startEddy(t, "run", "-c", path)
		if !await.Holds(60*time.Second, func() bool { return strings.Count(p.output(), "timed out after 2s") >= 2 }) {
			t.Fatal("aligned checkpoints did not time out behind the slow operator")
		}
		p.kill()
		if p.logContains("checkpoint completed") {
			t.Error("an aligned checkpoint completed within 2s behind the slow operator")
		}
	})

	for _, tc := range []struct{ name, mode string }{
		{"unaligned", `unaligned = true`},
		{"aligned_timeout", `aligned_timeout = "200ms"`},
	} {
		t.Run(tc.name+" kill -9", func(t *testing.T) {
			dir, path := unalignedRun(t, src, "1ms", tc.mode)
			var all strings.Builder
			kills := 0
			for {
				p := startEddy(t, "run", "-c", path)
				if kills < 3 {
					// Kill once an unaligned checkpoint with in-flight records
					// completed in this run, or let it end.
					await.Holds(90*time.Second, func() bool { return p.exited() || unalignedWithRecords(p.output()) > 0 })
					killed := false
					if !p.exited() && unalignedWithRecords(p.output()) > 0 {
						p.kill()
						killed = true
					}
					if killed {
						kills++
						all.WriteString(p.output())
						continue
					}
				}
				if !p.wait(120 * time.Second) {
					t.Fatal("run did not finish")
				}
				all.WriteString(p.output())
				if p.err != nil {
					t.Fatalf("run exited with %v", p.err)
				}
				break
			}
			s := all.String()
			if kills == 0 {
				t.Fatal("no unaligned checkpoint with in-flight records completed")
			}
			if !strings.Contains(s, "replayed in-flight records of an unaligned checkpoint") {
				t.Errorf("no restore replayed in-flight records (%d kills)", kills)
			}
			got := committedRecords(t, filepath.Join(dir, "out"))
			if !slices.Equal(got, want) {
				t.Fatalf("after %d kills: %d committed records, want the uninterrupted run's %d", kills, len(got), len(want))
			}
			t.Logf("%d kills; %d unaligned checkpoints with in-flight records completed", kills, unalignedWithRecords(s))
		})
	}
}
