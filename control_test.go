package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

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
	waitFor(t, 10*time.Second, func() bool { return ag.connected(t, "sensors") && ag.connected(t, "thresholds") })
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
	waitFor(t, 10*time.Second, func() bool {
		return metricValue(t, ag.admin, `eddy_control_keys{pipeline="alerts"}`) > 0
	})
	for i, temp := range []int{30, 60, 90} {
		send("sensors/a", fmt.Sprintf(`{"device":"a","temp":%d,"n":%d}`, temp, i)) // all above 20
		send("sensors/b", fmt.Sprintf(`{"device":"b","temp":%d,"n":%d}`, temp, i)) // only 90 above 80
		send("sensors/c", fmt.Sprintf(`{"device":"c","temp":%d,"n":%d}`, temp, i)) // default 50: 60 and 90
	}
	waitFor(t, 10*time.Second, func() bool { return len(hot()) == 6 })
	// A checkpoint holds the thresholds (the nudge is below c's default).
	ag.waitCheckpointAfter(t, 10*time.Second, func() { send("sensors/c", `{"device":"c","temp":0,"n":8}`) })
	ag.kill()

	ag2 := startAgent(t, dir, cfg)
	waitFor(t, 10*time.Second, func() bool { return ag2.connected(t, "sensors") })
	send("sensors/b", `{"device":"b","temp":70,"n":9}`) // below b's restored threshold
	send("sensors/a", `{"device":"a","temp":25,"n":9}`) // above a's restored threshold
	// b's reading went in first: had it passed the filter, it would be
	// the 7th line.
	waitFor(t, 10*time.Second, func() bool { return len(hot()) >= 7 })
	got := hot()
	if len(got) != 7 || !strings.Contains(got[6], `"device":"a","temp":25`) {
		t.Fatalf("after the restart the thresholds were not applied:\n%s", strings.Join(got, "\n"))
	}
	ag2.stop(syscall.SIGTERM, 20*time.Second)
}
