package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/scripts/await"
)

// selfContained reports whether cfg runs on this machine alone: its sources
// are files, simulators or the embedded broker, and it sends nothing
// upstream or to S3.
func selfContained(cfg *config.Config) bool {
	if cfg.Upload != nil {
		return false
	}
	for _, s := range cfg.Sources {
		if s.MQTT != nil && s.MQTT.Broker != "embedded" {
			return false
		}
	}
	for _, s := range cfg.Sinks {
		if s.MQTT != nil || s.Sparkplug != nil {
			return false
		}
	}
	return true
}

// fixedAddr matches the fixed loopback ports examples listen on, replaced
// by free ones so a run cannot collide with anything else on the machine.
var fixedAddr = regexp.MustCompile(`"127\.0\.0\.1:\d+"`)

// TestExamples_ValidateAndRun: every configuration in examples/ passes
// `eddy validate`, and every self-contained one runs from the repository's
// top as its comment says: it either ends by itself with exit 0 after
// printing results, or prints a window result, then stops cleanly on
// SIGTERM. The results of a cookbook example with an entry in
// exampleBehaviour must show the behaviour it is named for.
func TestExamples_ValidateAndRun(t *testing.T) {
	paths, err := filepath.Glob("examples/*.hcl")
	if err != nil || len(paths) < 3 {
		t.Fatalf("examples: %v %v", paths, err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			if out, err := runEddy(t, "validate", "-c", path); err != nil {
				t.Fatalf("eddy validate -c %s: %v\n%s", path, err, out)
			}
			cfg, diags := config.Loader{}.Load(path)
			if diags.HasErrors() {
				t.Fatal(config.FormatDiagnostics(diags))
			}
			if !selfContained(cfg) {
				t.Logf("%s needs an external broker or S3: validated only", path)
				return
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// data_dir and relative paths resolve against the working
			// directory: run in the repository's top, data_dir moved away.
			text := fixedAddr.ReplaceAllString(string(data), `"127.0.0.1:0"`)
			text = regexp.MustCompile(`data_dir *= *"[^"]*"`).ReplaceAllString(text, `data_dir = "`+filepath.Join(t.TempDir(), "data")+`"`)
			conf := filepath.Join(t.TempDir(), filepath.Base(path))
			if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			p := startEddy(t, "run", "-c", conf)
			behaviour := exampleBehaviour[filepath.Base(path)]
			result := func() bool {
				out := p.output()
				if behaviour != nil {
					return behaviour(exampleRecords(out)) == nil
				}
				return strings.Contains(out, " final#") || strings.Contains(out, `"kind":"final"`)
			}
			await.True(t, 2*time.Minute, `p.exited() || result()`, func() bool { return p.exited() || result() })
			if !p.exited() {
				p.signal(syscall.SIGTERM)
				if !p.wait(time.Minute) {
					t.Fatal("did not stop within a minute of SIGTERM")
				}
			}
			if behaviour != nil {
				if err := behaviour(exampleRecords(p.output())); err != nil {
					t.Fatalf("run ended with %v; %v", p.err, err)
				}
			}
			if p.err != nil || !result() {
				t.Fatalf("run ended with %v, results printed: %v", p.err, result())
			}
		})
	}
}

// exampleRecord is a record an example prints with sink "stdout" { format
// = "jsonl" }; Secs is its time in seconds after cookbookStart.
type exampleRecord struct {
	Key      string   `json:"key"`
	Kind     string   `json:"kind"`
	TimeMS   int64    `json:"time_ms"`
	Value    *float64 `json:"value"`
	Temp     *float64 `json:"temp"`
	MsgID    string   `json:"msg_id"`
	Duration int64    `json:"duration_ms"`
	Secs     int64    `json:"-"`
}

// cookbookStart is the time of the first reading in the cookbook's data
// files (examples/data): 2025-12-01T08:00:00Z.
const cookbookStart = 1764576000000

// exampleRecords returns the JSON records in out, in order; log lines and
// pretty output are skipped.
func exampleRecords(out string) []exampleRecord {
	var recs []exampleRecord
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, `{"id":`) {
			continue
		}
		var r exampleRecord
		if json.Unmarshal([]byte(line), &r) == nil {
			r.Secs = (r.TimeMS - cookbookStart) / 1000
			recs = append(recs, r)
		}
	}
	return recs
}

// describe renders records for a comparison: key, kind, seconds after the
// start and the value, temp, msg_id or duration when present.
func describe(recs []exampleRecord) string {
	var parts []string
	for _, r := range recs {
		s := fmt.Sprintf("%s %s @%ds", r.Key, r.Kind, r.Secs)
		switch {
		case r.Value != nil:
			s += fmt.Sprintf(" value=%g", *r.Value)
		case r.Temp != nil:
			s += fmt.Sprintf(" temp=%g", *r.Temp)
		case r.MsgID != "":
			s += " msg_id=" + r.MsgID
		}
		if r.Duration > 0 {
			s += fmt.Sprintf(" lasted=%ds", r.Duration/1000)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// wantRecords checks that recs, described, are want; prefix says that the
// first records are to match and more may follow (the end of a replay may
// add its own, as absence's silence of every key).
func wantRecords(recs []exampleRecord, want string, prefix bool) error {
	got := describe(recs)
	if got == want || (prefix && strings.HasPrefix(got, want+"; ")) {
		return nil
	}
	return fmt.Errorf("records:\n  %s\nwant:\n  %s", got, want)
}

// exampleBehaviour checks, per cookbook example, that its records show
// what the example is named for, on the data file it replays.
var exampleBehaviour = map[string]func([]exampleRecord) error{
	// Within the 0.5 °C deadband nothing is sent, until the heartbeat
	// after a minute of silence sends the steady value; the jump to 23 °C
	// is sent at once, and a minute later the heartbeat again.
	"report-by-exception.hcl": func(recs []exampleRecord) error {
		return wantRecords(recs, "sensor-1 report @0s value=21; sensor-1 report @60s value=21.1; "+
			"sensor-1 report @80s value=23; sensor-1 report @140s value=23", false)
	},
	// Raised above 80 (at 81); 79, 76, 72 and 71 are below 80 but not
	// below 70, so it stays raised until 69; then raised again at 82.
	"hysteresis-alarm.hcl": func(recs []exampleRecord) error {
		return wantRecords(recs, "boiler-1 raised @20s temp=81; boiler-1 cleared @80s temp=69 lasted=60s; "+
			"boiler-1 raised @120s temp=82", false)
	},
	// sensor-2's last reading before its gap is at 91 s: silent two
	// minutes later, resumed at its next reading, 270 s after that one.
	"sensor-absence.hcl": func(recs []exampleRecord) error {
		return wantRecords(recs, "sensor-2 silent @211s; sensor-2 resumed @361s lasted=270s", true)
	},
	// m-3 comes twice in the file and passes once.
	"dedup.hcl": func(recs []exampleRecord) error {
		return wantRecords(recs, "meter-1 reading @0s msg_id=m-1; meter-1 reading @60s msg_id=m-2; "+
			"meter-1 reading @120s msg_id=m-3; meter-1 reading @180s msg_id=m-4; "+
			"meter-1 reading @240s msg_id=m-5; meter-1 reading @300s msg_id=m-6", false)
	},
}
