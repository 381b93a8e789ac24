package config

import (
	"strings"
	"testing"
	"time"
)

// TestReportByException_Mistakes pins the diagnostics of the
// report_by_exception block: position, summary and the hint of the fix.
func TestReportByException_Mistakes(t *testing.T) {
	for _, tc := range []struct {
		name, pipeline, pos, want string
	}{
		{"negative deadband", `pipeline "p" {
  from = source.mqtt.sensors
  report_by_exception {
    value    = event.v
    deadband = -1
  }
  to = [sink.stdout.out]
}`, "12:16", `Value out of range; "deadband" must be a number ≥ 0`},
		{"heartbeat without unit", `pipeline "p" {
  from = source.mqtt.sensors
  report_by_exception {
    value     = event.v
    heartbeat = 600
  }
  to = [sink.stdout.out]
}`, "12:17", `Invalid duration; "heartbeat" needs a unit`},
		{"missing value", `pipeline "p" {
  from = source.mqtt.sensors
  report_by_exception {
    deadband = 1
  }
  to = [sink.stdout.out]
}`, "10:3", `Missing required argument; The report_by_exception block needs "value"`},
		{"with a window", `pipeline "p" {
  from = source.mqtt.sensors
  key  = event.d
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  report_by_exception { value = event.v }
  to = [sink.stdout.out]
}`, "13:3", "report_by_exception with a window; report_by_exception follows readings one by one"},
		{"map field named value", `pipeline "p" {
  from = source.mqtt.sensors
  map { value = event.v }
  report_by_exception { value = event.v }
  to = [sink.stdout.out]
}`, "10:9", `Map field named value`},
		{"alarm with a window", `pipeline "p" {
  from = source.mqtt.sensors
  key  = event.d
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  alarm "hot" { raise = event.v > 80 }
  to = [sink.stdout.out]
}`, "13:3", "alarm with a window"},
		{"two report_by_exception", `pipeline "p" {
  from = source.mqtt.sensors
  report_by_exception { value = event.v }
  report_by_exception { value = event.w }
  to = [sink.stdout.out]
}`, "11:3", "Duplicate report_by_exception block"},
		{"absence with a window", `pipeline "p" {
  from = source.mqtt.sensors
  key  = event.d
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  absence { timeout = "1h" }
  to = [sink.stdout.out]
}`, "13:3", "absence with a window; absence follows readings one by one and emits records of its own, and a window aggregates them; a pipeline has one or the other (only dedup may come before a window)"},
		{"alarm min_duration", `pipeline "p" {
  from = source.mqtt.sensors
  alarm "hot" {
    raise        = event.v > 80
    min_duration = "-1s"
  }
  to = [sink.stdout.out]
}`, "12:20", `Negative duration; "min_duration" must be zero or positive`},
		{"alarm without raise", `pipeline "p" {
  from = source.mqtt.sensors
  alarm "hot" { clear = event.v < 70 }
  to = [sink.stdout.out]
}`, "10:3", `Missing required argument; The alarm "hot" block needs "raise"`},
		{"alarm map field named start", `pipeline "p" {
  from = source.mqtt.sensors
  map { start = event.v }
  alarm "hot" { raise = event.v > 80 }
  to = [sink.stdout.out]
}`, "10:9", `Map field named start; The records of an alarm carry "start"`},
		{"two alarms of one name", `pipeline "p" {
  from = source.mqtt.sensors
  alarm "hot" { raise = event.v > 80 }
  alarm "hot" { raise = event.v > 90 }
  to = [sink.stdout.out]
}`, "11:9", `Duplicate alarm name; An alarm named "hot" is already declared at test.hcl:10,3-14`},
		{"dedup within zero", `pipeline "p" {
  from = source.mqtt.sensors
  dedup {
    id     = event.msg_id
    within = "0s"
  }
  to = [sink.stdout.out]
}`, "12:14", `Value out of range; "within" is how long repeats of an id are dropped`},
		{"dedup without within", `pipeline "p" {
  from = source.mqtt.sensors
  dedup { id = event.msg_id }
  to = [sink.stdout.out]
}`, "10:3", `Missing required argument; The dedup block needs "within"`},
		{"absence on processing time in event-time order", `pipeline "p" {
  from  = source.mqtt.sensors
  order = "event_time"
  absence {
    timeout = "5m"
    time    = "processing"
  }
  to = [sink.stdout.out]
}`, "10:11", `Event-time order with processing-time absence; absence on processing time counts a key's silence from each reading's arrival`},
		{"report_by_exception on processing time without heartbeat", `pipeline "p" {
  from = source.mqtt.sensors
  report_by_exception {
    value = event.v
    time  = "processing"
  }
  to = [sink.stdout.out]
}`, "12:13", `Processing time without heartbeat; time says on which clock the heartbeat counts`},
		{"absence timeout zero", `pipeline "p" {
  from = source.mqtt.sensors
  absence { timeout = "0s" }
  to = [sink.stdout.out]
}`, "10:23", `Value out of range; "timeout" is how long a key may stay quiet`},
		{"absence state_ttl too short", `pipeline "p" {
  from      = source.mqtt.sensors
  absence { timeout = "1h" }
  state_ttl = "30m"
  to        = [sink.stdout.out]
}`, "11:15", `state_ttl not above the absence timeout`},
		{"alarm named as absence's records", `pipeline "p" {
  from = source.mqtt.sensors
  alarm "absence" { raise = event.v > 80 }
  absence { timeout = "1h" }
  to = [sink.stdout.out]
}`, "10:3", `Alarm named absence; The records of the absence block of this pipeline have "absence" in their ids, as this alarm's would; give the alarm another name`},
		{"unknown attribute", `pipeline "p" {
  from = source.mqtt.sensors
  report_by_exception {
    value     = event.v
    dead_band = 1
  }
  to = [sink.stdout.out]
}`, "12:5", `Did you mean "deadband"?`},
	} {
		t.Run(tc.name, func(t *testing.T) { checkKeyedDiagnostic(t, tc.pipeline, tc.pos, tc.want) })
	}
}

// TestReportByException_Settings decodes the block, and state_ttl,
// order and late_output on its pipeline; a per-key call in its value joins
// the pipeline's calls last.
func TestReportByException_Settings(t *testing.T) {
	cfg := mustParse(t, keyedBase+`pipeline "p" {
  from = source.mqtt.sensors
  key  = event.d
  map { d = delta(event.c) }
  report_by_exception {
    value     = prev(event.v)
    deadband  = 0.5
    heartbeat = "10m"
  }
  state_ttl   = "24h"
  order       = "event_time"
  to          = [sink.stdout.out]
  late_output = sink.file.late
}
`, noEnv)
	p := cfg.Pipelines[0]
	r := p.ReportByException
	if r == nil || r.Value == nil || r.Deadband != 0.5 || r.Heartbeat != 10*time.Minute {
		t.Fatalf("report_by_exception %+v", r)
	}
	if !p.Keyed() || p.StateTTL != 24*time.Hour || p.LateOutput == nil {
		t.Errorf("keyed %v, state_ttl %v, late_output %v", p.Keyed(), p.StateTTL, p.LateOutput)
	}
	var names []string
	for _, c := range p.KeyedCalls() {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "delta,prev" {
		t.Errorf("keyed calls %v, want delta, prev", names)
	}
}

// TestAlarm_Settings decodes the alarm block.
func TestAlarm_Settings(t *testing.T) {
	cfg := mustParse(t, keyedBase+`pipeline "p" {
  from = source.mqtt.sensors
  key  = event.d
  alarm "overheat" {
    raise        = event.temp > 80
    clear        = event.temp < 70
    min_duration = "30s"
  }
  to          = [sink.stdout.out]
  late_output = sink.file.late
}
`, noEnv)
	p := cfg.Pipelines[0]
	if len(p.Alarms) != 1 {
		t.Fatalf("%d alarms", len(p.Alarms))
	}
	a := p.Alarms[0]
	if a.Name != "overheat" || a.Raise == nil || a.Clear == nil || a.MinDuration != 30*time.Second {
		t.Fatalf("alarm %+v", a)
	}
	if !p.Keyed() || p.LateOutput == nil {
		t.Errorf("keyed %v, late_output %v", p.Keyed(), p.LateOutput)
	}
}

// TestDedup_Settings decodes the dedup block beside a window: it drops
// repeats before the window counts them.
func TestDedup_Settings(t *testing.T) {
	cfg := mustParse(t, keyedBase+`pipeline "p" {
  from = source.mqtt.sensors
  key  = event.d
  dedup {
    id     = event.msg_id
    within = "1h"
  }
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to          = [sink.stdout.out]
  late_output = sink.file.late
}
`, noEnv)
	p := cfg.Pipelines[0]
	if d := p.Dedup; d == nil || d.ID == nil || d.Within != time.Hour || !p.Keyed() {
		t.Fatalf("dedup %+v, keyed %v", d, p.Keyed())
	}
}

// TestAbsence_EventTimeNeedsTimestamp refuses absence on event time on a
// source without a timestamp, and takes it on processing time (the
// default).
func TestAbsence_EventTimeNeedsTimestamp(t *testing.T) {
	_, diags := Loader{Env: noEnv, DeviceID: fixedDeviceID}.Parse([]byte(`source "mqtt" "s" {
  broker = "tcp://127.0.0.1:1883"
  topics = ["a/b"]
}
sink "stdout" "out" {}
pipeline "p" {
  from = source.mqtt.s
  absence {
    timeout = "5m"
    time    = "event"
  }
  to = [sink.stdout.out]
}
pipeline "q" {
  from = source.mqtt.s
  absence { timeout = "5m" }
  to = [sink.stdout.out]
}
`), "test.hcl")
	out := FormatDiagnostics(diags)
	if !strings.Contains(out, "test.hcl:10:15: error: Event-time absence without event time; absence on event time counts on the readings' timestamps") {
		t.Errorf("diagnostics:\n%s", out)
	}
	if strings.Count(out, "error:") != 1 {
		t.Errorf("absence on processing time (the default) needs no timestamp; diagnostics:\n%s", out)
	}
}

// TestKeyedBlocks_DeclarationOrder decodes a pipeline with one block of
// each kind and two alarms: p.Blocks keeps the declaration order (which
// the agent chains them in), and the per-key calls of their expressions
// join the pipeline's alarm by alarm.
func TestKeyedBlocks_DeclarationOrder(t *testing.T) {
	cfg := mustParse(t, keyedBase+`pipeline "p" {
  from   = source.mqtt.sensors
  key    = event.d
  filter = event.ok
  dedup {
    id     = event.msg_id
    within = "1h"
  }
  absence {
    timeout = "5m"
    time    = "event"
  }
  alarm "hot" { raise = prev(event.v) > 80 }
  report_by_exception { value = event.v }
  alarm "cold" {
    raise = event.v < 0
    clear = changed(event.v)
  }
  state_ttl   = "1h"
  to          = [sink.stdout.out]
  late_output = sink.file.late
}
`, noEnv)
	p := cfg.Pipelines[0]
	var names []string
	for _, b := range p.Blocks {
		names = append(names, b.Name())
	}
	if got, want := strings.Join(names, ", "), `dedup, absence, alarm "hot", report_by_exception, alarm "cold"`; got != want {
		t.Errorf("blocks %s, want %s", got, want)
	}
	if len(p.Alarms) != 2 || p.Alarms[0].Name != "hot" || p.Alarms[1].Name != "cold" || p.ReportByException == nil || p.Absence == nil || p.Dedup == nil {
		t.Errorf("alarms %v, report %v, absence %v, dedup %v", p.Alarms, p.ReportByException, p.Absence, p.Dedup)
	}
	var calls []string
	for _, c := range p.KeyedCalls() {
		calls = append(calls, c.Name)
	}
	if strings.Join(calls, ",") != "prev,changed" {
		t.Errorf("keyed calls %v, want prev, changed", calls)
	}
}

// TestKeyedBlocks_DedupDeclaredLate warns about a dedup declared after
// another block (it runs first anyway, as it did before blocks were
// chained, so such configurations still load) and keeps it first.
func TestKeyedBlocks_DedupDeclaredLate(t *testing.T) {
	cfg, diags := Loader{Env: noEnv, DeviceID: fixedDeviceID}.Parse([]byte(keyedBase+`pipeline "p" {
  from = source.mqtt.sensors
  alarm "hot" { raise = event.v > 80 }
  absence {
    timeout = "1h"
    time    = "event"
  }
  dedup {
    id     = event.msg_id
    within = "1h"
  }
  to          = [sink.stdout.out]
  late_output = sink.file.late
}
`), "test.hcl")
	out := FormatDiagnostics(diags)
	if diags.HasErrors() || !strings.Contains(out, `test.hcl:15:3: warning: dedup after alarm "hot"; dedup drops repeated readings before the map and before every other per-key block, whatever the order they are declared in: move this dedup block above alarm "hot" to say so.`) {
		t.Fatalf("diagnostics:\n%s", out)
	}
	if p := cfg.Pipelines[0]; p.Dedup == nil || len(p.Blocks) != 3 {
		t.Errorf("dedup %v, %d blocks", p.Dedup, len(p.Blocks))
	}
}
