package source

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// classify tells a reading's kind from its payload alone, as a consumer
// would, given the wall clock it was made at.
func classify(t testing.TB, payload []byte, nowMs int64) readingKind {
	t.Helper()
	var r struct {
		Device   string
		Ts       *int64
		Temp     any
		Humidity float64
	}
	if err := json.Unmarshal(payload, &r); err != nil || r.Ts == nil {
		return readingMalformed
	}
	if _, ok := r.Temp.(float64); !ok {
		return readingMalformed
	}
	switch age := nowMs - *r.Ts; {
	case age >= 29000 && age < 95000: // slack for delivery time
		return readingLate
	case age >= 100 && age < 29000:
		return readingOutOfOrder
	case age >= 0 && age < 100:
		return readingOnTime // or out of order by less than the jitter
	}
	t.Fatalf("reading %s is %d ms old: no kind fits", payload, nowMs-*r.Ts)
	return readingInvalid
}

func TestReadingGenerator_Mix(t *testing.T) {
	opts := SimulatorOptions{Topic: "sensors/${sensor}/telemetry", Devices: 5, Seed: 42, OutOfOrder: 0.1, Late: 0.05, Malformed: 0.02}
	g := newReadingGenerator(opts)
	const n = 20000
	const now = 1_700_000_000_000
	counts := map[readingKind]int{}
	seen := map[readingKind]int{}
	temps := map[string][]float64{}
	for i := range n {
		topic, payload, kind := g.reading(now)
		counts[kind]++
		got := classify(t, payload, now)
		if kind == readingOutOfOrder && got == readingOnTime {
			got = readingOutOfOrder // less than 100 ms back: indistinguishable from jitter
		}
		if got != kind {
			t.Fatalf("reading %d %s: generated as %d, looks like %d", i, payload, kind, got)
		}
		seen[got]++
		wantTopic := "sensors/sensor-" + string(rune('1'+i%5)) + "/telemetry"
		if topic != wantTopic {
			t.Fatalf("reading %d topic %q, want %q (round robin)", i, topic, wantTopic)
		}
		var r struct {
			Device string
			Temp   float64
		}
		if kind != readingMalformed && json.Unmarshal(payload, &r) == nil {
			temps[r.Device] = append(temps[r.Device], r.Temp)
		}
	}
	for kind, want := range map[readingKind]float64{readingOutOfOrder: 0.1, readingLate: 0.05, readingMalformed: 0.02} {
		got := float64(counts[kind]) / n
		if math.Abs(got-want) > want/5 {
			t.Errorf("kind %d: fraction %.4f, want %.2f ±20%%", kind, got, want)
		}
	}
	// Devices have different climates and realistic values.
	var means []float64
	for dev, ts := range temps {
		sum := 0.0
		for _, v := range ts {
			sum += v
			if v < -10 || v > 50 {
				t.Fatalf("%s: temperature %v out of a plausible range", dev, v)
			}
		}
		means = append(means, sum/float64(len(ts)))
	}
	if len(means) != 5 {
		t.Fatalf("%d devices, want 5", len(means))
	}
	spread := 0.0
	for _, m := range means {
		spread = max(spread, math.Abs(m-means[0]))
	}
	if spread < 0.5 {
		t.Errorf("device means %v: want different climates", means)
	}
}

func TestReadingGenerator_Deterministic(t *testing.T) {
	opts := SimulatorOptions{Topic: "t/${sensor}", Devices: 3, Seed: 7, OutOfOrder: 0.2, Late: 0.1, Malformed: 0.1}
	a, b := newReadingGenerator(opts), newReadingGenerator(opts)
	opts.Seed = 8
	c := newReadingGenerator(opts)
	differs := false
	for i := range 1000 {
		ta, pa, ka := a.reading(1000000)
		tb, pb, kb := b.reading(1000000)
		_, pc, _ := c.reading(1000000)
		if ta != tb || ka != kb || !bytes.Equal(pa, pb) {
			t.Fatalf("reading %d differs for the same seed: %s vs %s", i, pa, pb)
		}
		differs = differs || !bytes.Equal(pa, pc)
	}
	if !differs {
		t.Fatal("seeds 7 and 8 gave the same readings")
	}
}
