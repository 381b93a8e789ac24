package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestSimulate_ConstantSensorsSendOnlyHeartbeats(t *testing.T) {
	// A constant 20 °C: after the warm-up's first report at 0 s, heartbeats
	// at 600 s, 1200 s, …; the measured hour [3600 s, 7200 s) holds 3600,
	// 4200, …, 6600: 6 per sensor.
	u := simulate(fleet{sensors: 3, warmup: time.Hour, measured: time.Hour, deadband: 0.2, heartbeat: 10 * time.Minute, seed: 1})
	if u.readings != 3*3600 || u.changes != 0 || u.heartbeats != 3*6 {
		t.Fatalf("got %+v, want 10800 readings, 0 changes, 18 heartbeats", u)
	}
}

func TestSimulate_DeadbandZeroSendsEveryReading(t *testing.T) {
	u := simulate(fleet{sensors: 2, warmup: time.Minute, measured: time.Hour, deadband: 0, heartbeat: 10 * time.Minute, drift: 0.01, seed: 7})
	if u.reports() != u.readings || u.heartbeats != 0 {
		t.Fatalf("got %+v, want every reading reported as a change", u)
	}
}

func TestSimulate_Deterministic(t *testing.T) {
	f := fleet{sensors: 20, warmup: time.Minute, measured: time.Hour, deadband: 0.2, heartbeat: 10 * time.Minute, drift: 0.01, noise: 0.05, seed: 3}
	a, b := simulate(f), simulate(f)
	if a != b {
		t.Fatalf("same seed, different results: %+v and %+v", a, b)
	}
	f.seed = 4
	if c := simulate(f); c == a {
		t.Fatalf("seeds 3 and 4 gave the same result %+v", a)
	}
}

func TestReport_Rows(t *testing.T) {
	var out bytes.Buffer
	report(&out, fleet{sensors: 2, warmup: time.Minute, measured: time.Hour, deadband: 0.2, heartbeat: 10 * time.Minute, seed: 1},
		[]float64{0, 0.01}, []float64{0})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], `heartbeat = "10m" }, seed 1, 1m warm-up`) || !strings.HasPrefix(lines[2], "0 ") {
		t.Fatalf("output:\n%s", out.String())
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{10 * time.Minute: "10m", time.Hour: "1h", 90 * time.Minute: "1h30m", 30 * time.Second: "30s", 0: "0s"} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
