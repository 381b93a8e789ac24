package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// TestControl_ThresholdsFromTheCloud: per-device thresholds pushed on a
// control topic are read by the pipeline's filter (control.threshold[…]);
// the control state is part of the checkpoint, so after a SIGKILL and a
// restart the filter still applies the thresholds without their being sent
// again.
func TestControl_ThresholdsFromTheCloud(t *testing.T) {
	b := mosquitto.Start(t)
	dir := t.TempDir()
	cfg := `
agent {
  device_id = "ctl"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
source "mqtt" "sensors" {
  broker = "` + b.URL() + `"
  topics = ["sensors/+"]
}
source "mqtt" "thresholds" {
  broker = "` + b.URL() + `"
  topics = ["control/thresholds"]
}
sink "file" "hot" { path = "%DIR%/hot.jsonl" }
pipeline "alerts" {
  from    = source.mqtt.sensors
  control = source.mqtt.thresholds
  filter  = event.temp > coalesce(control.threshold[event.device], 50)
  to      = [sink.file.hot]
}
checkpoint { interval = "200ms" }
`
	ag := startAgent(t, dir, cfg)
	await.True(t, 10*time.Second, `ag.connected(t, "sensors") && ag.connected(t, "thresholds")`, func() bool { return ag.connected(t, "sensors") && ag.connected(t, "thresholds") })
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("ctl-pub"))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer pub.Disconnect(100)
	send := func(topic, payload string) {
		t.Helper()
		if tok := pub.Publish(topic, 1, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatal(tok.Error())
		}
	}
	hot := func() []string {
		data, _ := os.ReadFile(filepath.Join(dir, "hot.jsonl"))
		var ids []string
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if l != "" {
				ids = append(ids, l)
			}
		}
		return ids
	}
	send("control/thresholds", `{"threshold":{"a":20,"b":80}}`)
	// The control stream is its own input: the thresholds are in the
	// control state before the readings are sent.
	await.True(t, 10*time.Second, "metricValue(t, ag.admin, `eddy_control_keys{pipeline=\"alerts\"}`) > 0", func() bool {
		return metricValue(t, ag.admin, `eddy_control_keys{pipeline="alerts"}`) > 0
	})
	for i, temp := range []int{30, 60, 90} {
		send("sensors/a", fmt.Sprintf(`{"device":"a","temp":%d,"n":%d}`, temp, i)) // all above 20
		send("sensors/b", fmt.Sprintf(`{"device":"b","temp":%d,"n":%d}`, temp, i)) // only 90 above 80
		send("sensors/c", fmt.Sprintf(`{"device":"c","temp":%d,"n":%d}`, temp, i)) // default 50: 60 and 90
	}
	await.True(t, 10*time.Second, `len(hot()) == 6`, func() bool { return len(hot()) == 6 })
	// A checkpoint holds the thresholds (the nudge is below c's default).
	ag.waitCheckpointAfter(t, 10*time.Second, func() { send("sensors/c", `{"device":"c","temp":0,"n":8}`) })
	ag.kill()

	ag2 := startAgent(t, dir, cfg)
	await.True(t, 10*time.Second, `ag2.connected(t, "sensors")`, func() bool { return ag2.connected(t, "sensors") })
	send("sensors/b", `{"device":"b","temp":70,"n":9}`) // below b's restored threshold
	send("sensors/a", `{"device":"a","temp":25,"n":9}`) // above a's restored threshold
	// b's reading went in first: had it passed the filter, it would be
	// the 7th line.
	await.True(t, 10*time.Second, `len(hot()) >= 7`, func() bool { return len(hot()) >= 7 })
	got := hot()
	if len(got) != 7 || !strings.Contains(got[6], `"device":"a","temp":25`) {
		t.Fatalf("after the restart the thresholds were not applied:\n%s", strings.Join(got, "\n"))
	}
	ag2.stop(syscall.SIGTERM, 20*time.Second)
}

// TestControl_KeyedAlarmCapturesAtArrival: an alarm reads its threshold
// from the control stream (raise = event.temp > control.limit). Each
// reading is judged by the limit in force when it arrived, though the
// event-time buffer releases it later and in time order: readings sent
// under limit 50 keep it after the limit goes to 40, so a's reading at
// 8 s (45, sent under 50) does not raise while its reading at 9 s (45,
// sent under 40) does, and its reading at 11 s (48, under 50) clears it.
// The records are the same at parallelism 1 and 3, byte for byte.
func TestControl_KeyedAlarmCapturesAtArrival(t *testing.T) {
	const base = 1_700_000_000_000
	want := []string{
		`{"id":"ctl/alerts/b/hot/raised/1700000007000/0","pipeline":"alerts","key":"b","time":"2023-11-14T22:13:27.000Z","time_ms":1700000007000,"kind":"raised","start":"2023-11-14T22:13:27.000Z","start_ms":1700000007000}`,
		`{"id":"ctl/alerts/a/hot/raised/1700000009000/0","pipeline":"alerts","key":"a","time":"2023-11-14T22:13:29.000Z","time_ms":1700000009000,"kind":"raised","start":"2023-11-14T22:13:29.000Z","start_ms":1700000009000}`,
		`{"id":"ctl/alerts/a/hot/cleared/1700000011000/1","pipeline":"alerts","key":"a","time":"2023-11-14T22:13:31.000Z","time_ms":1700000011000,"kind":"cleared","start":"2023-11-14T22:13:29.000Z","start_ms":1700000009000,"end":"2023-11-14T22:13:31.000Z","end_ms":1700000011000,"duration_ms":2000}`,
	}
	var outs []string
	for _, par := range []string{"1", "3"} {
		b := mosquitto.Start(t)
		dir := t.TempDir()
		cfg := `
agent {
  device_id   = "ctl"
  data_dir    = "%DATA%"
  admin       = "%ADMIN%"
  parallelism = ` + par + `
}
source "mqtt" "sensors" {
  broker = "` + b.URL() + `"
  topics = ["sensors/+"]
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark { max_out_of_orderness = "5s" }
}
source "mqtt" "limits" {
  broker = "` + b.URL() + `"
  topics = ["control/limits"]
}
sink "file" "alarms" { path = "%DIR%/alarms.jsonl" }
pipeline "alerts" {
  from    = source.mqtt.sensors
  control = source.mqtt.limits
  key     = event.device
  alarm "hot" { raise = event.temp > control.limit }
  to      = [sink.file.alarms]
}
`
		ag := startAgent(t, dir, cfg)
		await.True(t, 10*time.Second, `ag.connected(t, "sensors") && ag.connected(t, "limits")`, func() bool { return ag.connected(t, "sensors") && ag.connected(t, "limits") })
		pub := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("ctl-pub"))
		if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatal(tok.Error())
		}
		send := func(topic, payload string) {
			t.Helper()
			if tok := pub.Publish(topic, 1, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatal(tok.Error())
			}
		}
		reading := func(device string, sec, temp int) {
			send("sensors/"+device, fmt.Sprintf(`{"device":%q,"ts":%d,"temp":%d}`, device, base+sec*1000, temp))
		}
		controlKeys := func(n float64) func() bool {
			return func() bool { return metricValue(t, ag.admin, `eddy_control_keys{pipeline="alerts"}`) == n }
		}
		readingsIn := func(n float64) func() bool {
			return func() bool { return metricValue(t, ag.admin, `eddy_readings_in_total{pipeline="alerts"}`) == n }
		}
		send("control/limits", `{"limit":50}`)
		await.True(t, 10*time.Second, `the condition`, controlKeys(1))
		reading("a", 10, 60)                                          // 60 > 50
		reading("a", 8, 45)                                           // 45 > 50: no, though 45 > 40 when it is released
		reading("b", 9, 55)                                           // 55 > 50
		reading("a", 11, 48)                                          // 48 > 50: no, though 48 > 40
		await.True(t, 10*time.Second, `the condition`, readingsIn(4)) // prepared under limit 50
		send("control/limits", `{"limit":40,"rev":2}`)
		await.True(t, 10*time.Second, `the condition`, controlKeys(2))
		reading("a", 9, 45) // 45 > 40
		reading("b", 7, 45) // 45 > 40
		reading("z", 60, 0) // moves the watermark past the others
		lines := func() []string {
			data, _ := os.ReadFile(filepath.Join(dir, "alarms.jsonl"))
			return strings.Split(strings.TrimSpace(string(data)), "\n")
		}
		await.True(t, 10*time.Second, `len(lines()) >= len(want)`, func() bool { return len(lines()) >= len(want) })
		ag.stop(syscall.SIGTERM, 20*time.Second)
		pub.Disconnect(100)
		if got := lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("parallelism %s: alarm records:\n%s\nwant:\n%s", par, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		data, _ := os.ReadFile(filepath.Join(dir, "alarms.jsonl"))
		outs = append(outs, string(data))
	}
	if outs[0] != outs[1] {
		t.Fatalf("parallelism 1 and 3 differ:\n%s\n---\n%s", outs[0], outs[1])
	}
}
