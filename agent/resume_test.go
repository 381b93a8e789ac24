package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/operators/io/ingest"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

const resumeConfig = `
agent {
  device_id = "rs"
  data_dir  = "%DATA%"
  admin     = "127.0.0.1:0"
}
broker { listen = "%BROKER%" }
source "mqtt" "sensors" {
  broker = "embedded"
  topics = ["s/+"]
  timestamp { field = "ts" }
  watermark { %WATERMARK% }
}
sink "file" "out" { path = "%DIR%/out.jsonl" }
sink "file" "late" { path = "%DIR%/late.jsonl" }
pipeline "p" {
  from        = source.mqtt.sensors
  key         = event.k
  window "tumbling" { size = "1s" }
  aggregate { n = count() }
  to          = [sink.file.out]
  late_output = sink.file.late
}
`

// resumeLog is an ingest log as a source writes it when its broker resumes
// the session and sends what it stored behind newer readings: the entry at
// arrival 2,000 opens the resumed connection (ts 5,000, live), the two after
// it are the stored backlog (ts 1,500 and 1,600), and a reading a minute
// later still is ordinarily late (ts 100).
var resumeLog = []struct {
	arrival int64
	resumed bool
	ts      int64
}{
	{1000, false, 1000},
	{2000, true, 5000},
	{2100, false, 1500},
	{2200, false, 1600},
	{9000, false, 6000},
	{70_000, false, 7000},
	{70_001, false, 100},
	{70_002, false, 9000},
}

// TestResume_LateBacklogAndHold runs the agent over an ingest log whose
// entries carry FlagResumed as a source writes them. Without a hold the
// backlog is late: counted as resumed_backlog, apart from the ordinary late
// reading, with one WARN naming the source and the remedy. With
// hold_after_resume the backlog lands in its window and only the ordinary
// late reading is late.
func TestResume_LateBacklogAndHold(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an agent")
	}
	tests := []struct {
		name, watermark      string
		first                string // the count of window [1000, 2000)
		lateResumed, lateOrd uint64
		warn                 bool
	}{
		{"no hold", `max_out_of_orderness = "0s"`, `"n":1`, 2, 1, true},
		{"hold", `hold_after_resume = "5s"`, `"n":3`, 0, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := ingest.Open(filepath.Join(dir, "data", "ingest", "sensors"), ingest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var batch []ingest.Entry
			for _, e := range resumeLog {
				en := ingest.Entry{Arrival: e.arrival, Topic: []byte("s/a"), Payload: fmt.Appendf(nil, `{"k":"a","ts":%d}`, e.ts)}
				if e.resumed {
					en.Flags = ingest.FlagResumed
				}
				batch = append(batch, en)
			}
			if _, _, err := l.Append(batch); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			cfg := strings.NewReplacer("%BROKER%", loopback.Addr(t), "%WATERMARK%", tt.watermark).Replace(resumeConfig)
			a := startAgent(t, dir, cfg)
			late := a.metrics.GetOrCreateCounter(`eddy_readings_late_total{pipeline="p",reason="late"}`)
			lateResumed := a.metrics.GetOrCreateCounter(`eddy_readings_late_total{pipeline="p",reason="resumed_backlog"}`)
			var out []byte
			await.Until(t, 30*time.Second, func() error {
				out, _ = os.ReadFile(filepath.Join(dir, "out.jsonl"))
				// The window [8000, 9000) fires last, when 9,000 is read.
				if strings.Contains(string(out), `"window_start_ms":7000`) && late.Get()+lateResumed.Get() == tt.lateResumed+tt.lateOrd {
					return nil
				}
				return fmt.Errorf("late %d+%d, output:\n%s", lateResumed.Get(), late.Get(), out)
			})
			if got, got2 := lateResumed.Get(), late.Get(); got != tt.lateResumed || got2 != tt.lateOrd {
				t.Fatalf("late: resumed_backlog %d, late %d; want %d, %d", got, got2, tt.lateResumed, tt.lateOrd)
			}
			var first map[string]any
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				var r map[string]any
				if json.Unmarshal([]byte(line), &r) == nil && r["window_start_ms"] == float64(1000) {
					first = r
				}
			}
			if b, _ := json.Marshal(first); !strings.Contains(string(b), tt.first) {
				t.Fatalf("window [1000, 2000): %s, want %s", b, tt.first)
			}
			logPath := filepath.Join(dir, "agent.log")
			const warn = "readings late after the broker resumed the session"
			if !tt.warn {
				// Nothing was late after the resume (resumed_backlog is 0,
				// checked above), so no burst opened: its WARN is logged
				// when it opens.
				if log, _ := os.ReadFile(logPath); strings.Contains(string(log), warn) {
					t.Fatalf("a burst's WARN logged with the hold:\n%s", log)
				}
				return
			}
			// The WARN at the burst's start, the total when it ends.
			const ended = "burst of late readings after the resumed session ended"
			var log string
			await.Until(t, 32*time.Second, func() error { // 30 s and the burst's quiet period (2 s)
				b, _ := os.ReadFile(logPath)
				if log = string(b); !strings.Contains(log, ended) {
					return fmt.Errorf("no end of the burst logged:\n%s", log)
				}
				return nil
			})
			if n := strings.Count(log, warn); n != 1 {
				t.Fatalf("%d WARNs for one burst:\n%s", n, log)
			}
			for line, wants := range map[string][]string{
				warn:  {"level=WARN", "source=sensors", "hold_after_resume", "late_output"},
				ended: {"level=INFO", "source=sensors", "late=2"},
			} {
				l := log[strings.LastIndex(log[:strings.Index(log, line)], "\n")+1:]
				l = l[:strings.IndexByte(l, '\n')]
				for _, want := range wants {
					if !strings.Contains(l, want) {
						t.Fatalf("%q lacks %q", l, want)
					}
				}
			}
		})
	}
}
