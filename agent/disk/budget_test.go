package agent

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

func TestDefaultDiskBudget(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name       string
		st         fsStats
		held, want int64
	}{
		{"half of an empty file system", fsStats{size: 64 * gib, free: 64 * gib}, 0, 32 * gib},
		{"half, though more is free", fsStats{size: 64 * gib, free: 40 * gib}, 1 * gib, 32 * gib},
		{"what is free, when less than half", fsStats{size: 32 * gib, free: 1 * gib}, 0, 1 * gib},
		{"what is free plus what Eddy holds", fsStats{size: 32 * gib, free: 1 * gib}, 2 * gib, 3 * gib},
		{"a full disk: only what Eddy holds", fsStats{size: 8 * gib, free: 0}, 3 * gib, 3 * gib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := defaultDiskBudget(tt.st, tt.held); got != tt.want {
				t.Errorf("defaultDiskBudget(%+v, %d) = %d, want %d", tt.st, tt.held, got, tt.want)
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
		st         fsStats
		want       int64
		wantWarned bool
	}{
		{"explicit", `max_disk = "3GiB"`, fsStats{size: 2 * gib, free: gib}, 3 * gib, false},
		{"derived, bounds fit", "", fsStats{size: 16 * gib, free: 16 * gib}, 8 * gib, false},
		{"derived, bounds do not fit", "", fsStats{size: 4 * gib, free: 4 * gib}, 2 * gib, true},
		{"derived from free space plus what is held", "", fsStats{size: 16 * gib, free: gib}, gib + 3000, true},
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
			m := newDiskMeter(&Agent{cfg: cfg}, func(p string) (fsStats, error) {
				if p != dataDir {
					t.Errorf("statfs(%q), want data_dir %q", p, dataDir)
				}
				return tt.st, nil
			})
			m.start(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			if got := m.budget.Load(); got != tt.want {
				t.Errorf("budget = %d, want %d", got, tt.want)
			}
			if got := m.usage[0].Load(); got != 3000 {
				t.Errorf("ingest usage = %d, want 3000", got)
			}
			if m.free.Load() != tt.st.free {
				t.Errorf("free = %d, want %d", m.free.Load(), tt.st.free)
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

// TestMetrics_DiskGauges runs an agent with max_disk that takes readings
// through its embedded broker into a file sink under data_dir, with
// checkpoints: /metrics shows the budget, the file system's free space and
// the bytes of the ingest log, the checkpoints and the sink's output.
func TestMetrics_DiskGauges(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an agent")
	}
	dir := t.TempDir()
	brokerAddr := loopback.Addr(t)
	a := startAgent(t, dir, `
agent {
  device_id = "disk"
  data_dir  = "%DATA%"
  admin     = "127.0.0.1:0"
  max_disk  = "3GiB"
}
broker { listen = "`+brokerAddr+`" }
source "mqtt" "s" {
  broker = "embedded"
  topics = ["sensors/+/telemetry"]
  qos    = 1
}
sink "file" "out" { path = "out.jsonl" }
pipeline "p" {
  from = source.mqtt.s
  to   = [sink.file.out]
}
checkpoint { interval = "100ms" }
`)
	c := connectSensor(t, brokerAddr)
	var toks []paho.Token
	for i := range 100 {
		toks = append(toks, c.Publish("sensors/d/telemetry", 1, false, fmt.Sprintf(`{"device":"d","i":%d}`, i)))
	}
	for _, tok := range toks {
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	deadline := time.Now().Add(3*diskSampleInterval + 30*time.Second)
	for {
		m := scrapeMetrics(t, a)
		if m[`eddy_disk_bytes{component="ingest"}`] > 0 && m[`eddy_disk_bytes{component="checkpoints"}`] > 0 &&
			m[`eddy_disk_bytes{component="sink"}`] > 0 && m["eddy_disk_budget_bytes"] == 3<<30 && m["eddy_disk_free_bytes"] > 0 {
			_, wal := m[`eddy_disk_bytes{component="wal"}`]
			_, st := m[`eddy_disk_bytes{component="state"}`]
			t.Logf("ingest %v, checkpoints %v, sink %v, wal %v, state %v bytes; budget %v, free %v", m[`eddy_disk_bytes{component="ingest"}`],
				m[`eddy_disk_bytes{component="checkpoints"}`], m[`eddy_disk_bytes{component="sink"}`], m[`eddy_disk_bytes{component="wal"}`],
				m[`eddy_disk_bytes{component="state"}`], m["eddy_disk_budget_bytes"], m["eddy_disk_free_bytes"])
			if !wal || !st {
				t.Errorf("the wal and state components are missing (the pipeline has neither, but every component is reported): %v", m)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("disk gauges not as expected: %v", m)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStatusPage_Disk: the status page and /api/agent show the disk
// meter's last sample: the budget, the free space and each component's use.
func TestStatusPage_Disk(t *testing.T) {
	a := mustBuildAgent(t, testConfig, true)
	ta := newTestAdmin(t, a, "")
	if _, b, _ := ta.do(t, "GET", "/", ""); !strings.Contains(string(b), `<p id="disk-budget">Not configured.</p>`) {
		t.Errorf("before a sample, the page lacks the empty disk section:\n%s", b)
	}
	a.disk = newDiskMeter(a, func(string) (fsStats, error) { return fsStats{size: 8 << 30, free: 1 << 30}, nil })
	a.disk.budget.Store(4 << 30)
	a.disk.free.Store(1 << 30)
	a.disk.usage[0].Store(2 << 20) // ingest
	a.disk.usage[2].Store(1 << 20) // checkpoints
	_, b, _ := ta.do(t, "GET", "/", "")
	for _, want := range []string{
		`<p id="disk-budget">Using 3.0 MiB of a budget of 4.0 GiB; 1.0 GiB free on data_dir's file system.</p>`,
		`<tr><th scope="row">ingest</th><td>2.0 MiB</td></tr>`,
		`<tr><th scope="row">checkpoints</th><td>1.0 MiB</td></tr>`,
		`<tr><th scope="row">sink</th><td>0 B</td></tr>`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	var got struct {
		Disk *admin.DiskReport `json:"disk"`
	}
	ta.getJSON(t, "/api/agent", http.StatusOK, &got)
	if d := got.Disk; d == nil || d.BudgetBytes != 4<<30 || d.FreeBytes != 1<<30 || len(d.Components) != 5 ||
		d.Components[0] != (admin.DiskComponentUsage{Component: "ingest", Bytes: 2 << 20}) {
		t.Errorf("/api/agent disk = %+v", got.Disk)
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
