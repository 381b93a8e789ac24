package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func runFootprint(args []string) error {
	fs := flag.NewFlagSet("footprint", flag.ContinueOnError)
	var o footprintOptions
	fs.IntVar(&o.rate, "rate", 10_000, "readings/s")
	fs.DurationVar(&o.dur, "duration", 60*time.Second, "measured time at the rate (after a 5 s warm-up)")
	fs.IntVar(&o.devices, "devices", 1000, "devices (keys)")
	fs.StringVar(&o.window, "window", "1m", "tumbling window size")
	fs.StringVar(&o.interval, "checkpoint-interval", "10s", "checkpoint { interval }")
	fs.StringVar(&o.outOfOrder, "out-of-orderness", "0s", "watermark { max_out_of_orderness }")
	sinks := fs.String("sinks", "file", "exactly-once sinks to run, one agent each: file, mqtt (the WAL sink, upstream = the same mosquitto)")
	fs.StringVar(&o.ingestAck, "ingest-ack", "after_fsync", "ingest log ack mode: after_fsync or after_write")
	fs.StringVar(&o.ingestLinger, "ingest-linger", "", `ingest { linger }, e.g. "10ms" (empty: the agent's default)`)
	fs.StringVar(&o.ingestCompression, "ingest-compression", "", `ingest { compression }: zstd, s2 or none (empty: the agent's default)`)
	fs.IntVar(&o.perfSeconds, "perf", 0, "if > 0, record the agent with perf for this many seconds of the run (perf.data in the working directory)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "eddybench-footprint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin, err := buildEddy(tmp)
	if err != nil {
		return err
	}
	br, err := startBroker(tmp)
	if err != nil {
		return err
	}
	defer br.stop()
	t := newTable("sink (exactly once)", "rate", "agent CPU (% of one core)", "peak RSS (VmHWM)", "RSS, mean of the last minute", "RSS slope after the first minute", "written/min (write_bytes)",
		"of it ingest / checkpoints / WAL / sink / state (rest)", "mosquitto CPU", "readings in/sent", "checkpoints")
	for _, sink := range splitList(*sinks) {
		progress("footprint: %s sink, %d readings/s for %v (+5 s warm-up)", sink, o.rate, o.dur)
		row, err := measureFootprint(bin, br, filepath.Join(tmp, sink), sink, o)
		if err != nil {
			return err
		}
		t.add(row...)
	}
	fmt.Printf("\n(c) footprint at a fixed rate: MQTT QoS 1 → ingest log → %s tumbling event-time windows (out-of-orderness %s), %d devices, count/sum/max → exactly-once sink; checkpoints every %s; ingest ack %s, linger %s, compression %s; measured over %v from /proc/PID/{stat,status,io}, RSS sampled every second; bytes per file class from the largest size each file reached (the state's working files are the rest of write_bytes); %d CPUs, %s\n\n",
		o.window, o.outOfOrder, o.devices, o.interval, o.ingestAck, orDefault(o.ingestLinger), orDefault(o.ingestCompression), o.dur, runtime.NumCPU(), runtime.Version())
	t.write(os.Stdout)
	return nil
}

// footprintOptions are runFootprint's flags.
type footprintOptions struct {
	rate, devices, perfSeconds                 int
	dur                                        time.Duration
	window, interval, outOfOrder               string
	ingestAck, ingestLinger, ingestCompression string
}

// config is the agent's configuration for one sink's run.
func (o footprintOptions) config(brokerURL, sink, out string) string {
	cfg := agentConfig(brokerURL, "eddy-bench-fp-"+sink, "bench/fp-"+sink+"/+", "exactly_once", out, o.window)
	cfg = strings.NewReplacer(`checkpoint { interval = "10s" }`, fmt.Sprintf("checkpoint { interval = %q }", o.interval),
		`max_out_of_orderness = "0s"`, fmt.Sprintf("max_out_of_orderness = %q", o.outOfOrder)).Replace(cfg)
	cfg += fmt.Sprintf("ingest {\n  ack = %q\n", o.ingestAck)
	if o.ingestLinger != "" {
		cfg += fmt.Sprintf("  linger = %q\n", o.ingestLinger)
	}
	if o.ingestCompression != "" {
		cfg += fmt.Sprintf("  compression = %q\n", o.ingestCompression)
	}
	return cfg + "}\n"
}

// measureFootprint runs one agent with the given exactly-once sink in dir
// at the paced rate and returns its row of the table: CPU and write_bytes
// from /proc between the end of the warm-up and the end of the run, RSS
// sampled every second, the bytes per file class.
func measureFootprint(bin string, br *broker, dir, sink string, o footprintOptions) ([]any, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "out")
	if sink == "mqtt" {
		out = "mqtt:" + br.url()
	}
	ag, err := startAgent(bin, dir, o.config(br.url(), sink, out))
	if err != nil {
		return nil, err
	}
	if err := waitConnected(ag); err != nil {
		ag.kill()
		return nil, err
	}
	pub, err := newPublisher(br.url(), "bench-pub-fp-"+sink, "bench/fp-"+sink, o.devices)
	if err != nil {
		ag.kill()
		return nil, err
	}
	type result struct {
		sent int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		n, err := pub.publishPaced(o.rate, o.dur+5*time.Second, nil)
		done <- result{n, err}
	}()
	time.Sleep(5 * time.Second) // warm-up: connections, first windows, first checkpoint under way
	a0, err0 := sampleProc(ag.pid())
	b0, _ := sampleProc(br.pid())
	c0, _ := ag.checkpoints()
	if o.perfSeconds > 0 {
		perf := exec.Command("perf", "record", "-g", "-o", "perf-"+sink+".data", "-p", strconv.Itoa(ag.pid()), "--", "sleep", strconv.Itoa(o.perfSeconds))
		if out, err := perf.CombinedOutput(); err != nil {
			progress("perf: %v %s", err, out)
		}
	}
	// RSS and the files' sizes once a second for the whole run.
	files := newFileWrites(dir)
	files.scan()
	w0 := files.snapshot()
	var at []float64
	var rss []int64
	for tick := time.NewTicker(time.Second); time.Since(a0.at) < o.dur; <-tick.C {
		if s, err := sampleProc(ag.pid()); err == nil {
			at, rss = append(at, s.at.Sub(a0.at).Seconds()), append(rss, s.rss)
		}
		files.scan()
	}
	a1, err1 := sampleProc(ag.pid())
	files.scan()
	w1 := files.snapshot()
	b1, _ := sampleProc(br.pid())
	c1, _ := ag.checkpoints()
	res := <-done
	pub.close()
	if res.err != nil || err0 != nil || err1 != nil {
		ag.kill()
		return nil, fmt.Errorf("footprint %s: %v %v %v", sink, res.err, err0, err1)
	}
	_ = ag.waitReadings("e2e", uint64(res.sent), 30*time.Second)
	rep, _ := ag.pipeline("e2e")
	if err := ag.stop(); err != nil {
		return nil, err
	}
	elapsed := a1.at.Sub(a0.at)
	perMin := float64(a1.writeBytes-a0.writeBytes) / elapsed.Minutes()
	classMin := func(c string) float64 { return float64(w1[c]-w0[c]) / elapsed.Minutes() }
	rest := perMin
	var classes []string
	for _, c := range []string{"ingest", "checkpoints", "wal", "sink"} {
		rest -= classMin(c)
		classes = append(classes, mib(classMin(c)))
	}
	classes = append(classes, mib(max(rest, 0)))
	mean, slope := rssTrend(at, rss)
	return []any{sink, si(float64(o.rate)) + "/s", cpuPercent(a0, a1), mib(float64(a1.peakRSS)), mib(mean), fmt.Sprintf("%+.2f MiB/min", slope), mib(perMin),
		strings.Join(classes, " / "), cpuPercent(b0, b1),
		fmt.Sprintf("%d/%d", rep.ReadingsIn, res.sent), fmt.Sprintf("%d completed, %d failed", c1.Completed-c0.Completed, c1.Failed-c0.Failed)}, nil
}

func orDefault(v string) string {
	if v == "" {
		return "default"
	}
	return v
}
