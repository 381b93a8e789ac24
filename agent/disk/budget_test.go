package disk

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/config"
)

func TestDefaultDiskBudget(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name       string
		st         Stats
		held, want int64
	}{
		{"half of an empty file system", Stats{Size: 64 * gib, Free: 64 * gib}, 0, 32 * gib},
		{"half, though more is free", Stats{Size: 64 * gib, Free: 40 * gib}, 1 * gib, 32 * gib},
		{"what is free, when less than half", Stats{Size: 32 * gib, Free: 1 * gib}, 0, 1 * gib},
		{"what is free plus what Eddy holds", Stats{Size: 32 * gib, Free: 1 * gib}, 2 * gib, 3 * gib},
		{"a full disk: only what Eddy holds", Stats{Size: 8 * gib, Free: 0}, 3 * gib, 3 * gib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := defaultBudget(tt.st, tt.held); got != tt.want {
				t.Errorf("defaultBudget(%+v, %d) = %d, want %d", tt.st, tt.held, got, tt.want)
			}
		})
	}
}

// TestDiskMeter_Start sets the budget of a configuration whose bounds add up
// to 2.5 GiB (an ingest log, a WAL, the state) against file systems statfs
// describes: an explicit max_disk is taken as is; without it the budget is
// derived (counting what data_dir holds already) and a warning names the
// bounds when they do not fit.
func TestDiskMeter_Start(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name       string
		maxDisk    string
		st         Stats
		want       int64
		wantWarned bool
	}{
		{"explicit", `max_disk = "3GiB"`, Stats{Size: 2 * gib, Free: gib}, 3 * gib, false},
		{"derived, bounds fit", "", Stats{Size: 16 * gib, Free: 16 * gib}, 8 * gib, false},
		{"derived, bounds do not fit", "", Stats{Size: 4 * gib, Free: 4 * gib}, 2 * gib, true},
		{"derived from free space plus what is held", "", Stats{Size: 16 * gib, Free: gib}, gib + 3000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			dataDir := filepath.Join(dir, "data")
			if err := os.MkdirAll(filepath.Join(dataDir, "ingest", "s"), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dataDir, "ingest", "s", "seg"), make([]byte, 3000), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, diags := config.Loader{DeviceID: func() (string, error) { return "d", nil }}.Parse([]byte(fmt.Sprintf(`
agent {
  data_dir = %q
  %s
}
source "mqtt" "s" {
  broker = "tcp://127.0.0.1:1883"
  topics = ["a"]
}
sink "mqtt" "out" {
  broker = "tcp://127.0.0.1:1883"
  topic  = "b"
}
pipeline "p" {
  from = source.mqtt.s
  key  = event.k
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to = [sink.mqtt.out]
}
`, dataDir, tt.maxDisk)), filepath.Join(dir, "a.hcl"))
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			var logs bytes.Buffer
			m := NewMeter(dataDir, nil, func(p string) (Stats, error) {
				if p != dataDir {
					t.Errorf("statfs(%q), want data_dir %q", p, dataDir)
				}
				return tt.st, nil
			}, nil, slog.New(slog.NewTextHandler(&logs, nil)))
			m.Start(cfg.Agent.MaxDiskBytes, cfg.DiskShares())
			if got := m.budget.Load(); got != tt.want {
				t.Errorf("budget = %d, want %d", got, tt.want)
			}
			if got := m.usage[0].Load(); got != 3000 {
				t.Errorf("ingest usage = %d, want 3000", got)
			}
			if m.free.Load() != tt.st.Free {
				t.Errorf("free = %d, want %d", m.free.Load(), tt.st.Free)
			}
			warned := strings.Contains(logs.String(), `bounds=2560MiB`)
			if warned != tt.wantWarned {
				t.Errorf("warned = %v, want %v; log:\n%s", warned, tt.wantWarned, logs.String())
			}
		})
	}
}

func TestPathBytes(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, n int) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("out.jsonl", 100)
	write("out.jsonl.1", 20)
	write("out.jsonl.2", 3)
	write("out.jsonl.tmp", 1000) // not a rotated copy
	write("parts/a/p1", 7)
	write("parts/p2", 8)
	for _, tt := range []struct {
		path    string
		rotated bool
		want    int64
	}{
		{"out.jsonl", true, 123},
		{"out.jsonl", false, 100},
		{"parts", true, 15},
		{"missing", true, 0},
	} {
		if got := pathBytes(filepath.Join(dir, tt.path), tt.rotated); got != tt.want {
			t.Errorf("pathBytes(%s, %v) = %d, want %d", tt.path, tt.rotated, got, tt.want)
		}
	}
}

// BenchmarkTreeBytes measures one walk of a directory of 10,000 files (an
// exactly_once file sink's parts after a day of 10 s checkpoints is 8,640).
func BenchmarkTreeBytes(b *testing.B) {
	dir := b.TempDir()
	for i := range 10_000 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%05d", i)), []byte("x"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if treeBytes(dir) != 10_000 {
			b.Fatal("wrong size")
		}
	}
}

// TestMeter_HoldsAtBudget: once the components together use the whole
// disk budget (here a checkpoint file as large as max_disk), the meter
// holds BudgetPlace, and /readyz's disk detail says "max_disk reached: X
// of Y"; once usage drops below the budget (the checkpoint collected), the
// next sample releases it and the detail is gone.
func TestMeter_HoldsAtBudget(t *testing.T) {
	dataDir := t.TempDir()
	big := filepath.Join(dataDir, "checkpoints", "chk-1")
	const budget = 64 << 10
	if err := os.MkdirAll(filepath.Dir(big), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, budget), 0o600); err != nil {
		t.Fatal(err)
	}
	var holds Holds
	var logs bytes.Buffer
	m := NewMeter(dataDir, nil, func(string) (Stats, error) { return Stats{Size: 1 << 30, Free: 1 << 29}, nil },
		&holds, slog.New(slog.NewTextHandler(&logs, nil)))
	m.Start(budget, nil)
	if d := holds.Detail(""); !strings.Contains(d, "disk_full: max_disk: max_disk reached: 64.0 KiB of 64.0 KiB in "+dataDir) {
		t.Fatalf("readiness detail %q does not say the budget is reached", d)
	}
	if !strings.Contains(logs.String(), "disk budget reached: ingest holds messages unacked") {
		t.Errorf("no line says the budget is reached:\n%s", logs.String())
	}
	if err := os.Remove(big); err != nil {
		t.Fatal(err)
	}
	m.Sample()
	if d := holds.Detail(""); d != "" {
		t.Fatalf("readiness detail %q after usage dropped", d)
	}
	if !strings.Contains(logs.String(), "disk usage below the budget again: ingest resumes") {
		t.Errorf("no line says ingest resumes:\n%s", logs.String())
	}
}

// TestDiskMeter_DerivedBudgetFollowsFreeSpace: without max_disk the budget
// is derived again at each sample, so a disk that was full at start (the
// budget then was only what Eddy held) holds ingest until an operator frees
// space, and releases it then without a restart.
func TestDiskMeter_DerivedBudgetFollowsFreeSpace(t *testing.T) {
	const mib = 1 << 20
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "ingest"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ingest", "seg"), make([]byte, mib), 0o600); err != nil {
		t.Fatal(err)
	}
	st := Stats{Size: 64 * mib, Free: 0}
	var holds Holds
	m := NewMeter(dir, nil, func(string) (Stats, error) { return st, nil }, &holds, nil)
	m.Start(0, nil)
	for _, tt := range []struct {
		name       string
		free       int64
		wantBudget int64
		held       bool
	}{
		{"full disk: only what Eddy holds", 0, mib, true},
		{"space freed", 8 * mib, 9 * mib, false},
		{"more freed than half the file system", 60 * mib, 32 * mib, false},
	} {
		st.Free = tt.free
		m.Sample()
		if got := m.budget.Load(); got != tt.wantBudget {
			t.Errorf("%s: budget %d, want %d", tt.name, got, tt.wantBudget)
		}
		if held := holds.Reason(BudgetPlace) != ""; held != tt.held {
			t.Errorf("%s: held %v, want %v", tt.name, held, tt.held)
		}
	}
}

// TestHolds_Detail: the /readyz detail lists the checkpoints' full disk
// first, then every hold by place, and is empty when nothing waits; each
// wait's start and end are reported once.
func TestHolds_Detail(t *testing.T) {
	var h Holds
	if d := h.Detail(""); d != "" {
		t.Fatalf("detail %q with nothing held", d)
	}
	if !h.Hold(StatePlace, "/d/state: no space") || h.Hold(StatePlace, "/d/state: no space left") {
		t.Fatal("Hold does not report once per wait that it started")
	}
	h.Hold(IngestPlace("s"), "/d/ingest/s: no space")
	want := "disk_full: checkpoints: /d/checkpoints: no space; ingest/s: /d/ingest/s: no space; state: /d/state: no space left; each resumes by itself when space frees"
	if d := h.Detail("/d/checkpoints: no space"); d != want {
		t.Fatalf("detail\n%q, want\n%q", d, want)
	}
	if !h.Release(StatePlace) || h.Release(StatePlace) {
		t.Fatal("Release does not report once per wait that it ended")
	}
	if r := h.Reason(StatePlace); r != "" {
		t.Fatalf("reason %q after release", r)
	}
}
