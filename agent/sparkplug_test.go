package agent

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/io/broker"
	"github.com/eddy-edge/eddy/operators/io/sparkplug"
)

const sparkplugSinkConfig = `
agent {
  device_id = "gw-7"
  data_dir  = "%s"
}
source "file" "in" { path = "in.jsonl" }
sink "sparkplug" "scada" {
  broker          = "tcp://127.0.0.1:1"
  group_id        = "plant1"
  edge_node_id    = "line-${device_id}"
  primary_host_id = "scada-1"
  username        = "gw"
  password        = "secret"
}
pipeline "p" {
  from = source.file.in
  key  = event.device
  window "tumbling" { size = "1m" }
  aggregate {
    n     = count()
    avg_v = avg(event.v)
  }
  to = [sink.sparkplug.scada]
}
`

// TestSparkplugSink_Wiring: a sink "sparkplug" block opens a Sparkplug
// sink, a transactional sink of the runner (the results it holds while
// the node is not born are in its log, synced at each barrier), whose edge node id and client id have ${device_id} filled
// in, with the block's group, primary host and credentials, its pipeline's
// count an Int64 and its other aggregates Double, and its bdSeq
// kept under data_dir; its gauges are on /metrics.
func TestSparkplugSink_Wiring(t *testing.T) {
	dataDir := t.TempDir()
	cfg, diags := config.Parse([]byte(fmt.Sprintf(sparkplugSinkConfig, dataDir)), "agent.hcl", func(string) (string, bool) { return "", false })
	if diags.HasErrors() {
		t.Fatal(config.FormatDiagnostics(diags))
	}
	s := cfg.SinkByName("scada")
	o := sparkplugOptions(cfg, s, broker.Endpoint{URL: s.Sparkplug.Broker, Username: "gw", Password: "secret"}, map[string]string{"device_id": "gw-7"})
	want := sparkplug.SinkOptions{Broker: "tcp://127.0.0.1:1", ClientID: "eddy-gw-7-scada", Username: "gw", Password: "secret",
		Node: sparkplug.Config{Group: "plant1", Node: "line-gw-7", PrimaryHost: "scada-1",
			Types: map[string]sparkplug.DataType{"n": sparkplug.TypeInt64, "avg_v": sparkplug.TypeDouble}, MaxDevices: 10000},
		BdSeqPath: filepath.Join(dataDir, "sparkplug", "scada.bdseq"), StoreDir: filepath.Join(dataDir, "sparkplug", "scada.wal"),
		MaxStoreBytes: 512 << 20, AwaitRecover: true, ProtocolVersion: 5}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("options\n%+v\nwant\n%+v", o, want)
	}

	df := &dataflow{cfg: cfg, deviceID: "gw-7", log: slog.New(slog.DiscardHandler), metrics: metrics.NewSet(), sinks: map[string]*sinkRunner{},
		sparkplugSinks: map[string]*atomic.Pointer[sparkplug.Sink]{}}
	r, err := df.sink(s)
	if err != nil {
		t.Fatal(err)
	}
	tx, ok := r.tx.(sparkplugTx)
	if !ok || r.plain != nil {
		t.Fatalf("sink runner: plain %T, tx %T; want the Sparkplug sink as its transactional sink", r.plain, r.tx)
	}
	sk := tx.Sink
	var out bytes.Buffer
	df.metrics.WritePrometheus(&out)
	for _, line := range []string{`eddy_sparkplug_born{sink="scada"} 0`, `eddy_sparkplug_held{sink="scada"} 0`, `eddy_sparkplug_dropped_total{sink="scada"} 0`} {
		if !strings.Contains(out.String(), line+"\n") {
			t.Errorf("/metrics lacks %s:\n%s", line, out.String())
		}
	}
	if err := sk.Close(); err != nil {
		t.Fatal(err)
	}
}
