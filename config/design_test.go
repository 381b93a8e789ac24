package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// TestLoad_DesignExample decodes the reference configuration of docs/architecture.md's design (testdata/design.hcl)
// and pins the values it must produce, defaults included.
func TestLoad_DesignExample(t *testing.T) {
	env := func(k string) (string, bool) {
		if k == "EDDY_DEVICE_ID" {
			return "gw-42", true
		}
		return "", false
	}
	cfg, diags := Loader{Env: env, DeviceID: fixedDeviceID}.Load("testdata/design.hcl")
	if len(diags) > 0 {
		t.Fatal(FormatDiagnostics(diags))
	}
	if got, want := cfg.Agent, (Agent{DeviceID: "gw-42", DataDir: "/var/lib/eddy", Admin: "127.0.0.1:8787", LogLevel: "info", LogFormat: "text",
		MaxKeyGroups: 128, Parallelism: 1, DeclRange: cfg.Agent.DeclRange}); !reflect.DeepEqual(got, want) {
		t.Errorf("agent = %+v, want %+v", got, want)
	}
	if cfg.Broker == nil || cfg.Broker.Listen != "127.0.0.1:1883" || cfg.Broker.MaxInflight != 1000 {
		t.Errorf("broker = %+v", cfg.Broker)
	}

	src := cfg.SourceByName("sensors")
	wantMQTT := &MQTTSource{Broker: "tcp://127.0.0.1:1883", ClientID: "eddy-${device_id}-sensors", Topics: []string{"sensors/+/telemetry"},
		QoS: 1, KeepAlive: 30 * time.Second, ReconnectMin: time.Second, ReconnectMax: time.Minute, Connections: 1, DedupWindow: 10 * time.Minute,
		MaxMessageSize: DefaultMaxMessageSize, MaxInflight: 1000, ProtocolVersion: 5, ReceiveMaximum: DefaultReceiveMaximum}
	if !reflect.DeepEqual(src.MQTT, wantMQTT) {
		t.Errorf("source mqtt = %+v, want %+v", src.MQTT, wantMQTT)
	}
	if src.Format != "json" || *src.Timestamp != (Timestamp{Field: "ts", Unit: "ms"}) ||
		src.Watermark != (Watermark{MaxOutOfOrderness: 2 * time.Second, IdleTimeout: 30 * time.Second, MaxFutureSkew: time.Minute}) {
		t.Errorf("source = %+v", src)
	}

	cloud := cfg.SinkByName("cloud").MQTT
	wantCloud := &MQTTSink{Broker: "ssl://iot.example.com:8883", ClientID: "eddy-${device_id}-cloud", Topic: "sites/${device_id}/${pipeline}/${key}",
		QoS: 2, Delivery: ExactlyOnce, Buffer: Buffer{MaxDiskBytes: 512 << 20, WhenFull: "block"}, MaxInflight: 20, ProtocolVersion: 5,
		DrainTimeout: 30 * time.Second}
	if !reflect.DeepEqual(cloud, wantCloud) {
		t.Errorf("sink cloud = %+v, want %+v", cloud, wantCloud)
	}
	if late := cfg.SinkByName("late").File; *late != (FileSink{Path: "late.jsonl", RotateSizeBytes: 64 << 20, Format: "jsonl", Delivery: AtLeastOnce}) {
		t.Errorf("sink late = %+v", late)
	}

	p := cfg.Pipelines[0]
	if p.Name != "temp_1m" || p.From.Source != src || len(p.To) != 1 || p.To[0].Sink != cfg.SinkByName("cloud") ||
		p.LateOutput == nil || p.LateOutput.Sink != cfg.SinkByName("late") || p.DeadLetter != nil || p.Parallelism != 1 {
		t.Errorf("pipeline = %+v", p)
	}
	if p.Filter == nil || p.Key == nil || p.Map != nil {
		t.Errorf("pipeline expressions: filter %v key %v map %v", p.Filter, p.Key, p.Map)
	}
	if got := traversalString(p.Key); got != "event.device" {
		t.Errorf("key = %q", got)
	}
	w := *p.Window
	w.DeclRange = hcl.Range{}
	if w != (Window{Kind: Tumbling, Time: EventTime, Size: time.Minute, AllowedLateness: 10 * time.Second}) {
		t.Errorf("window = %+v", w)
	}
	var aggs []string
	for _, a := range p.Aggregates {
		aggs = append(aggs, a.Name+"="+a.Func+"("+traversalString(a.Arg)+")")
	}
	if want := []string{"avg_temp=avg(event.temp)", "max_temp=max(event.temp)", "n=count()"}; !reflect.DeepEqual(aggs, want) {
		t.Errorf("aggregates = %v, want %v", aggs, want)
	}
	if p.Aggregates[2].Range.Start.Line != 45 {
		t.Errorf("aggregate n at line %d, want 45", p.Aggregates[2].Range.Start.Line)
	}

	if cfg.State.Backend != "bbolt" || cfg.State.CacheBytes != 32<<20 || cfg.Checkpoint.Interval != 10*time.Second || cfg.Checkpoint.Retain != 3 {
		t.Errorf("state %+v checkpoint %+v", cfg.State, cfg.Checkpoint)
	}
	u := *cfg.Upload
	u.DeclRange = hcl.Range{}
	if u != (Upload{Type: "s3", Endpoint: "minio.local:9000", Bucket: "eddy", Prefix: "${device_id}/", Secure: true, Concurrency: 2}) {
		t.Errorf("upload = %+v", u)
	}
	if Expand(u.Prefix, map[string]string{"device_id": cfg.Agent.DeviceID}) != "gw-42/" {
		t.Errorf("prefix does not expand")
	}
}

// traversalString renders a traversal expression like event.temp, or "" for
// nil.
func traversalString(e hcl.Expression) string {
	if e == nil {
		return ""
	}
	tr, diags := hcl.AbsTraversalForExpr(e)
	if diags.HasErrors() {
		return "?"
	}
	s := tr.RootName()
	for _, step := range tr[1:] {
		s += "." + step.(hcl.TraverseAttr).Name
	}
	return s
}

func TestParse_Simulator(t *testing.T) {
	cfg := mustParse(t, `broker { listen = "127.0.0.1:18830" }
source "simulator" "sim" {}
sink "stdout" "out" {}
pipeline "p" {
  from = source.simulator.sim
  to   = [sink.stdout.out]
  window "tumbling" { size = "5s" }
  aggregate { n = count() }
}
`, noEnv)
	sim := cfg.Sources[0].Simulator
	want := SimulatorSource{Broker: Embedded, Topic: "sensors/${sensor}/telemetry", Devices: 10, Rate: 20, OutOfOrder: 0.1, Late: 0.01, Malformed: 0.005,
		ProtocolVersion: 5}
	if *sim != want {
		t.Errorf("simulator = %+v, want %+v", *sim, want)
	}
	if got := sim.SubscribeFilter(); got != "sensors/+/telemetry" {
		t.Errorf("SubscribeFilter = %q", got)
	}
	if w := cfg.Pipelines[0].Window; w.Time != EventTime {
		t.Errorf("a simulator has event time by default; window time = %q", w.Time)
	}
}
