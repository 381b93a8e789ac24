package agent

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/agent/disk"
	"github.com/eddy-edge/eddy/operators/io/broker"
	"github.com/eddy-edge/eddy/operators/io/ingest"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// TestDiskBudget_IngestHoldsUntilUsageDrops: once the components together
// use the whole disk budget (here a checkpoint file as large as max_disk),
// a reading published into the embedded broker stays unacknowledged and
// out of the ingest log, /readyz's disk check says "max_disk reached: X of
// Y"; once usage drops below the budget (the checkpoint collected) the
// reading is logged and acknowledged, and the check is gone.
func TestDiskBudget_IngestHoldsUntilUsageDrops(t *testing.T) {
	dataDir := t.TempDir()
	b, l, in := startEmbeddedIntakeIn(t, filepath.Join(dataDir, "ingest", "s"), 0, broker.Options{}, ingest.Options{})
	holds := &disk.Holds{}
	in.mu.Lock()
	in.holds = holds
	in.mu.Unlock()

	big := filepath.Join(dataDir, "checkpoints", "chk-1")
	const budget = 64 << 10
	if err := os.MkdirAll(filepath.Dir(big), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, budget), 0o600); err != nil {
		t.Fatal(err)
	}
	m := disk.NewMeter(dataDir, nil, func(string) (disk.Stats, error) { return disk.Stats{Size: 1 << 30, Free: 1 << 29}, nil }, holds, nil)
	m.Start(budget, nil)
	detail := holds.Detail("")
	if !strings.Contains(detail, "disk_full: max_disk: max_disk reached: 64.0 KiB of 64.0 KiB") {
		t.Fatalf("readiness detail %q does not say the budget is reached", detail)
	}

	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("sensor").SetAutoReconnect(false))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	tok := c.Publish("sensors/s1/telemetry", 1, false, `{"seq":1}`)
	// Not acknowledged while held: bounded by a few retries of the intake.
	if tok.WaitTimeout(3 * noSpaceRetry) {
		t.Fatalf("the reading was acknowledged with the disk budget reached (err %v)", tok.Error())
	}
	if n := l.LastOffset(); n != 0 {
		t.Fatalf("the log holds %d entries with the budget reached", n)
	}

	if err := os.Remove(big); err != nil {
		t.Fatal(err)
	}
	m.Sample()
	if d := holds.Details(); len(d) != 0 {
		t.Fatalf("holds after usage dropped: %v", d)
	}
	if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("the reading was not acknowledged after usage dropped: %v", tok.Error())
	}
	if n := l.LastOffset(); n != 1 {
		t.Fatalf("the log holds %d entries, want 1", n)
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
	var m map[string]float64
	await.True(t, 3*disk.SampleInterval+30*time.Second, "every disk gauge reported", func() bool {
		m = scrapeMetrics(t, a)
		return m[`eddy_disk_bytes{component="ingest"}`] > 0 && m[`eddy_disk_bytes{component="checkpoints"}`] > 0 &&
			m[`eddy_disk_bytes{component="sink"}`] > 0 && m["eddy_disk_budget_bytes"] == 3<<30 && m["eddy_disk_free_bytes"] > 0
	})
	_, wal := m[`eddy_disk_bytes{component="wal"}`]
	_, st := m[`eddy_disk_bytes{component="state"}`]
	t.Logf("ingest %v, checkpoints %v, sink %v, wal %v, state %v bytes; budget %v, free %v", m[`eddy_disk_bytes{component="ingest"}`],
		m[`eddy_disk_bytes{component="checkpoints"}`], m[`eddy_disk_bytes{component="sink"}`], m[`eddy_disk_bytes{component="wal"}`],
		m[`eddy_disk_bytes{component="state"}`], m["eddy_disk_budget_bytes"], m["eddy_disk_free_bytes"])
	if !wal || !st {
		t.Errorf("the wal and state components are missing (the pipeline has neither, but every component is reported): %v", m)
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
	dataDir := t.TempDir()
	for _, f := range []struct {
		path string
		size int
	}{{"ingest/s/seg", 2 << 20}, {"checkpoints/chk-1", 1 << 20}} {
		p := filepath.Join(dataDir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, f.size), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m := disk.NewMeter(dataDir, nil, func(string) (disk.Stats, error) { return disk.Stats{Size: 8 << 30, Free: 1 << 30}, nil }, nil, nil)
	m.Start(4<<30, nil)
	a.diskMeter.Store(m)
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
