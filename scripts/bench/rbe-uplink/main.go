// Command rbe-uplink measures the uplink volume of report_by_exception: a
// simulated fleet of slowly drifting temperature sensors, one reading per
// second each, goes through keyed.ReportByException, and the program prints
// the messages per hour sent with it against sending every reading.
//
// Each sensor's temperature is a seeded Gaussian random walk (drift, °C per
// √s) starting at 20 °C, optionally with independent Gaussian measurement
// noise on each reading. Every sensor runs for -warmup first (so the hour
// measured starts in steady state, not with every sensor's first report),
// then for -hours, whose reports are counted by cause: change (|Δ| ≥
// deadband, or a sensor's first report) or heartbeat.
//
//	go run ./scripts/bench/rbe-uplink
//	go run ./scripts/bench/rbe-uplink -sensors 1000 -deadband 0.2 -heartbeat 10m -drift 0.005,0.01,0.02 -noise 0,0.05
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/eddy-edge/eddy/operators/keyed"
)

// fleet is one simulation's parameters.
type fleet struct {
	sensors   int
	warmup    time.Duration
	measured  time.Duration
	deadband  float64
	heartbeat time.Duration
	drift     float64 // σ of the walk's step per second, °C
	noise     float64 // σ of the measurement noise, °C
	seed      uint64
}

// uplink is what a simulation counted over the measured time.
type uplink struct {
	readings   int64 // every reading: what sending every reading costs
	changes    int64 // reports for a move of at least the deadband
	heartbeats int64 // reports for the heartbeat alone
}

func (u uplink) reports() int64 { return u.changes + u.heartbeats }

// simulate runs the fleet. Sensor i draws from its own PCG stream (seed, i),
// so the result does not depend on the order the sensors are stepped in.
func simulate(f fleet) uplink {
	rbe := keyed.ReportByException{Deadband: f.deadband, HeartbeatMs: f.heartbeat.Milliseconds(), Time: keyed.EventTimeDomain}
	if err := rbe.Validate(); err != nil {
		panic(err) // flags are checked in main
	}
	warm := int64(f.warmup / time.Second)
	total := warm + int64(f.measured/time.Second)
	var u uplink
	emit := func(keyed.Signal) {} // counted from the state's Seq
	for i := 0; i < f.sensors; i++ {
		rng := rand.New(rand.NewPCG(f.seed, uint64(i)))
		temp := 20.0
		var st keyed.ReportState
		for s := int64(0); s < total; s++ {
			temp += f.drift * rng.NormFloat64()
			v := temp + f.noise*rng.NormFloat64()
			before := st
			rbe.OnReading(&st, keyed.At{Event: s * 1000}, v, emit)
			if s < warm {
				continue
			}
			u.readings++
			switch {
			case st.Seq == before.Seq:
			case !before.Reported || math.Abs(v-before.Value) >= f.deadband:
				u.changes++ // a sensor's first report (no warm-up) counts as a change
			default:
				u.heartbeats++
			}
		}
	}
	return u
}

func main() {
	sensors := flag.Int("sensors", 1000, "sensors in the fleet")
	warmup := flag.Duration("warmup", time.Hour, "simulated time before the measured time")
	hours := flag.Float64("hours", 1, "measured simulated hours")
	deadband := flag.Float64("deadband", 0.2, "report_by_exception deadband, °C")
	heartbeat := flag.Duration("heartbeat", 10*time.Minute, "report_by_exception heartbeat")
	drifts := flag.String("drift", "0.005,0.01,0.02", "σ of the random walk's step per second, °C (comma-separated list)")
	noises := flag.String("noise", "0,0.05", "σ of each reading's measurement noise, °C (comma-separated list)")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	ds, err1 := parseList(*drifts)
	ns, err2 := parseList(*noises)
	if err1 != nil || err2 != nil || *sensors <= 0 || *hours <= 0 || *deadband < 0 || *heartbeat < 0 || *warmup < 0 {
		fmt.Fprintln(os.Stderr, "rbe-uplink: bad flags:", err1, err2)
		os.Exit(2)
	}
	base := fleet{sensors: *sensors, warmup: *warmup, measured: time.Duration(*hours * float64(time.Hour)),
		deadband: *deadband, heartbeat: *heartbeat, seed: *seed}
	report(os.Stdout, base, ds, ns)
}

func parseList(s string) ([]float64, error) {
	var vs []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%q: want numbers ≥ 0", s)
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// report simulates base with each drift and noise and prints one row each.
func report(w io.Writer, base fleet, drifts, noises []float64) {
	hours := base.measured.Hours()
	fmt.Fprintf(w, "%d sensors, 1 reading/s, report_by_exception { deadband = %g, heartbeat = \"%s\" }, seed %d, %s warm-up, %g h measured\n",
		base.sensors, base.deadband, shortDuration(base.heartbeat), base.seed, shortDuration(base.warmup), hours)
	fmt.Fprintf(w, "%-10s %-10s %16s %16s %14s %14s %10s\n",
		"drift °C/√s", "noise °C", "every reading/h", "rbe messages/h", "changes/h", "heartbeats/h", "reduction")
	for _, d := range drifts {
		for _, n := range noises {
			f := base
			f.drift, f.noise = d, n
			u := simulate(f)
			fmt.Fprintf(w, "%-11g %-10g %16.0f %16.0f %14.0f %14.0f %9.0f×\n", d, n,
				float64(u.readings)/hours, float64(u.reports())/hours,
				float64(u.changes)/hours, float64(u.heartbeats)/hours,
				float64(u.readings)/math.Max(1, float64(u.reports())))
		}
	}
}

// shortDuration writes d as the config does: 10m, not 10m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
