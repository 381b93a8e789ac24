package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// TestDedup_ProducerResendsSameID: a QoS 1 producer that re-sends after its
// own reconnect sends a new PUBLISH, without the DUP flag, so only the
// message id can tell it is a repeat (dedup_key with a window).
// Through real mosquitto into the real binary: 2,000 readings with ids, then
// 500 of them again from a new connection, are counted 2,000 times; two
// identical messages without an id are both counted; after a restart the
// ids are still known (the filter is rebuilt from the ingest log), so 100
// more repeats are dropped while 100 new ids count.
func TestDedup_ProducerResendsSameID(t *testing.T) {
	const devices, first, resent, later = 20, 2000, 500, 100
	b := mosquitto.Start(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	cfg := `
agent {
  device_id = "dedup"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
source "mqtt" "sensors" {
  broker       = "` + b.URL() + `"
  topics       = ["sensors/+/telemetry"]
  qos          = 1
  dedup_key    = "id"
  dedup_window = "1h"
}
sink "file" "out" { path = "` + out + `" }
pipeline "counts" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "500ms"
  }
  aggregate {
    n = count()
  }
  to = [sink.file.out]
}
`
	payload := func(i int) string {
		return fmt.Sprintf(`{"id":"r-%d","device":"dev-%d","v":%d}`, i, i%devices, i)
	}
	publish := func(clientID string, from, to int) {
		t.Helper()
		pub := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID(clientID).SetMaxResumePubInFlight(1000))
		if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publisher connect: %v", tok.Error())
		}
		defer pub.Disconnect(100)
		var toks []paho.Token
		for i := from; i < to; i++ {
			toks = append(toks, pub.Publish(fmt.Sprintf("sensors/dev-%d/telemetry", i%devices), 1, false, payload(i)))
		}
		for _, tok := range toks {
			if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
				t.Fatalf("publish: %v", tok.Error())
			}
		}
	}
	dropped := func(ag *eddyProc) float64 {
		return metricValue(t, ag.admin, `eddy_ingest_redeliveries_dropped_total{source="sensors"}`)
	}

	ag := startAgent(t, dir, cfg)
	await.True(t, 10*time.Second, `ag.connected(t, "sensors")`, func() bool { return ag.connected(t, "sensors") })
	publish("producer", 0, first)
	publish("producer-reconnected", 0, resent) // the same ids again, no DUP flag
	noID := `{"device":"dev-0","v":-1}`        // no id: kept, even when identical
	publish2 := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("no-id"))
	if tok := publish2.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
	for range 2 {
		if tok := publish2.Publish("sensors/dev-0/telemetry", 1, false, noID); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	publish2.Disconnect(100)
	await.True(t, 60*time.Second, `len(st) == 1 && st[0].ReadingsIn == first+2 && dropped(ag) == resent`, func() bool {
		st := ag.status(t)
		return len(st) == 1 && st[0].ReadingsIn == first+2 && dropped(ag) == resent
	})
	await.True(t, 60*time.Second, `sumOf(out, "n") >= first+2`, func() bool { return sumOf(out, "n") >= first+2 }) // every 500 ms window fires
	ag.stop(syscall.SIGTERM, 20*time.Second)

	ag = startAgent(t, dir, cfg)
	await.True(t, 10*time.Second, `ag.connected(t, "sensors")`, func() bool { return ag.connected(t, "sensors") })
	publish("producer-after-restart", first-later, first+later) // 100 known ids, 100 new
	await.True(t, 60*time.Second, `dropped(ag) == later`, func() bool { return dropped(ag) == later })
	await.True(t, 60*time.Second, `len(st) == 1 && st[0].ReadingsIn >= later`, func() bool {
		st := ag.status(t)
		return len(st) == 1 && st[0].ReadingsIn >= later
	})
	await.True(t, 60*time.Second, `sumOf(out, "n") >= first+2+later`, func() bool { return sumOf(out, "n") >= first+2+later })
	if d := dropped(ag); d != later {
		t.Errorf("after the restart %v repeats dropped, want %d", d, later)
	}
	ag.stop(syscall.SIGTERM, 20*time.Second)

	want := map[string]float64{}
	for i := range first + later {
		want["dev-"+strconv.Itoa(i%devices)]++
	}
	want["dev-0"] += 2
	got := map[string]float64{}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			Key string
			N   float64
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad output line %q: %v", sc.Text(), err)
		}
		got[r.Key] += r.N
	}
	for dev, n := range want {
		if got[dev] != n {
			t.Errorf("%s: counted %v readings, want %v", dev, got[dev], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("results for %d devices, want %d", len(got), len(want))
	}
}
