package agent

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/agent/stages"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// scrapeMetrics reads every sample of the agent's /metrics, by its name
// with labels as printed.
func scrapeMetrics(t *testing.T, a *Agent) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + a.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if strings.HasPrefix(line, "#") || i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestMetrics_StateAndIngestLag runs an agent whose only pipeline fails on
// its first reading and restarts 2 s later, while the sensors publish on
// into the ingest log: its lag (eddy_ingest_lag_records) grows with them,
// then falls to 0 once the restarted pipeline has caught up; the state
// gauges then report the open windows of the 10 keys, their timers and
// entries, and a bbolt file in use, also in /api/pipelines.
func TestMetrics_StateAndIngestLag(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an agent")
	}
	stages.RearmDebugPanic() // debug_panic_at_offset fires once per process
	const devices, readings = 10, 20_000
	dir := t.TempDir()
	brokerAddr := loopback.Addr(t)
	a := startAgent(t, dir, `
agent {
  device_id = "metrics"
  data_dir  = "%DATA%"
  admin     = "127.0.0.1:0"
}
broker { listen = "`+brokerAddr+`" }
source "mqtt" "s" {
  broker = "embedded"
  topics = ["sensors/+/telemetry"]
  qos    = 1
  timestamp {
    field = "ts"
    unit  = "ms"
  }
}
sink "file" "out" { path = "%DIR%/out.jsonl" }
pipeline "p" {
  from = source.mqtt.s
  key  = event.device
  window "tumbling" { size = "1h" }
  aggregate { n = count() }
  to = [sink.file.out]
  debug_panic_at_offset = 1
}
checkpoint { interval = "100ms" }
restart {
  strategy = "fixed_delay"
  delay    = "2s"
}
`)
	c := connectSensor(t, brokerAddr)
	lag := `eddy_ingest_lag_records{source="s"}`
	maxLag := 0.0
	done := make(chan struct{})
	go func() {
		defer close(done)
		base := time.Now().UnixMilli()
		var toks []paho.Token
		for i := range readings {
			d := i % devices
			toks = append(toks, c.Publish(fmt.Sprintf("sensors/d%d/telemetry", d), 1, false,
				fmt.Sprintf(`{"device":"d%d","ts":%d}`, d, base+int64(i/devices))))
		}
		for _, tok := range toks {
			if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
				t.Errorf("publish: %v", tok.Error())
				return
			}
		}
	}()
	const stateWindows = `eddy_state_windows{pipeline="p"}`
	var m map[string]float64
	await.Until(t, time.Minute, func() error {
		m = scrapeMetrics(t, a)
		maxLag = max(maxLag, m[lag])
		if m[`eddy_ingest_log_last_offset{source="s"}`] == readings && m[lag] == 0 &&
			m[`eddy_pipeline_restarts_total{pipeline="p"}`] == 1 && m[stateWindows] == devices {
			return nil
		}
		return fmt.Errorf("not caught up: %v", m)
	})
	<-done
	t.Logf("ingest lag peaked at %v readings; state: %v keys, %v windows, %v timers, %v file bytes, %v memory bytes", maxLag,
		m[`eddy_state_keys{pipeline="p"}`], m[stateWindows], m[`eddy_state_timers{pipeline="p"}`],
		m[`eddy_state_file_bytes{pipeline="p"}`], m[`eddy_state_memory_bytes{pipeline="p"}`])
	if maxLag < 1000 {
		t.Errorf("the ingest lag peaked at %v readings: want it to grow while the pipeline is down", maxLag)
	}
	for name, min := range map[string]float64{
		`eddy_state_keys{pipeline="p"}`:                 devices,  // a window per key, and its timers
		`eddy_state_timers{pipeline="p"}`:               devices,  // each window's end
		`eddy_state_file_bytes{pipeline="p"}`:           4096,     // at least bbolt's meta pages
		`eddy_state_file_written_bytes{pipeline="p"}`:   0,        // present: 20 keys stay in the write-back cache
		`eddy_state_memory_bytes{pipeline="p"}`:         1,        // the write-back cache
		`process_resident_memory_bytes`:                 1 << 20,  // the process's own figures
		`eddy_ingest_dedup_indexed_entries{source="s"}`: readings, // every reading logged is indexed
	} {
		if v, ok := m[name]; !ok || v < min {
			t.Errorf("%s = %v (present: %v), want at least %v", name, v, ok, min)
		}
	}
	reps := a.intro.Pipelines()
	if len(reps) != 1 || reps[0].State == nil || reps[0].State.Windows != devices || reps[0].State.FileBytes != int64(m[`eddy_state_file_bytes{pipeline="p"}`]) ||
		reps[0].State.FileWrittenBytes != int64(m[`eddy_state_file_written_bytes{pipeline="p"}`]) {
		t.Errorf("/api/pipelines state = %+v", reps[0].State)
	}
}
