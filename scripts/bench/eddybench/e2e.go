package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// e2eConfig is the agent of benchmark (b): MQTT QoS 1 → ingest log →
// event-time tumbling windows of 1 s (no out-of-orderness: one publisher
// stamps readings with its clock, in order) → a file sink, exactly once
// (part files committed at each checkpoint) or at least once (one file,
// flushed whenever the sink is idle). Checkpoints every 10 s either way.
func e2eConfig(brokerURL, clientID, topic, delivery, out string) string {
	return agentConfig(brokerURL, clientID, topic, delivery, out, "1s") + fmt.Sprintf("ingest { ack = %q }\n", e2eIngestAck)
}

// e2eIngestAck is the ingest log's ack mode in benchmark (b) (-ingest-ack).
var e2eIngestAck = "after_fsync"

// agentConfig is e2eConfig with a window size; out is a path, or for an
// exactly-once MQTT sink "mqtt:" + the upstream broker URL.
func agentConfig(brokerURL, clientID, topic, delivery, out, windowSize string) string {
	sink := fmt.Sprintf(`sink "file" "out" { path = %q }`, out)
	if upstream, ok := strings.CutPrefix(out, "mqtt:"); ok {
		sink = fmt.Sprintf(`sink "mqtt" "out" {
  broker   = %q
  topic    = "results/${device_id}/${pipeline}/${key}"
  delivery = %q
}`, upstream, delivery)
	} else if delivery == "exactly_once" {
		sink = fmt.Sprintf(`sink "file" "out" {
  path     = %q
  delivery = "exactly_once"
}`, out)
	}
	sinkType := "file"
	if strings.HasPrefix(out, "mqtt:") {
		sinkType = "mqtt"
	}
	return fmt.Sprintf(`
agent {
  device_id  = "bench"
  data_dir   = "%%DATA%%"
  admin      = "%%ADMIN%%"
  log_format = "json"
}
source "mqtt" "sensors" {
  broker    = %q
  client_id = %q
  topics    = [%q]
  qos       = 1
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark { max_out_of_orderness = "0s" }
}
%s
pipeline "e2e" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" { size = %q }
  aggregate {
    n   = count()
    sum = sum(event.v)
    max = max(event.v)
  }
  to = [sink.%s.out]
}
checkpoint { interval = "10s" }
`, brokerURL, clientID, topic, sink, windowSize, sinkType)
}

// rateBetween samples count every 10 ms until it reaches total (or timeout)
// and returns the rate between 10% and 90% of total, leaving out start-up
// and the tail.
func rateBetween(count func() int64, total int64, timeout time.Duration) (float64, error) {
	lo, hi := total/10, total*9/10
	var tLo, tHi time.Time
	var nLo, nHi int64
	deadline := time.Now().Add(timeout)
	for {
		n := count()
		now := time.Now()
		if tLo.IsZero() && n >= lo {
			tLo, nLo = now, n
		}
		if n >= hi {
			tHi, nHi = now, n
			break
		}
		if now.After(deadline) {
			return 0, fmt.Errorf("received %d of %d in %v", n, total, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return float64(nHi-nLo) / tHi.Sub(tLo).Seconds(), nil
}

// registerSession starts the agent once so the broker holds its persistent
// session (messages published while it is down are queued for it).
func registerSession(bin, dir, cfg string) error {
	ag, err := startAgent(bin, dir, cfg)
	if err != nil {
		return err
	}
	if err := waitConnected(ag); err != nil {
		ag.kill()
		return err
	}
	return ag.stop()
}

// waitConnected waits until the agent's MQTT source has subscribed.
func waitConnected(ag *agentProc) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m, err := ag.metric(`eddy_mqtt_connected{source="sensors"}`); err == nil && m == 1 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("agent's MQTT source did not connect: %s", ag.tail())
}

func runE2E(args []string) error {
	fs := flag.NewFlagSet("e2e", flag.ContinueOnError)
	n := fs.Int("n", 200_000, "readings in the backlog each throughput run drains")
	rate := fs.Int("rate", 10_000, "readings/s of the latency runs")
	dur := fs.Duration("duration", 30*time.Second, "length of each latency run")
	devices := fs.Int("devices", 100, "devices (keys)")
	fs.StringVar(&e2eIngestAck, "ingest-ack", e2eIngestAck, "ingest log ack mode: after_fsync or after_write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "eddybench-e2e-")
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
	t := newTable("run", "readings", "readings/s", "× raw", "p50 latency", "p99 latency", "max latency", "late+dropped+dead", "outputs ok", "agent CPU")

	// Raw paho subscriber: register its session, queue the backlog, drain.
	progress("e2e: raw paho subscriber, %d readings", *n)
	raw, err := newRawSubscriber(br.url(), "bench-raw", "bench/raw/+", 0)
	if err != nil {
		return err
	}
	raw.close()
	pubRate, err := publishBacklog(br.url(), "bench/raw", *devices, *n, 0)
	if err != nil {
		return err
	}
	raw, err = newRawSubscriber(br.url(), "bench-raw", "bench/raw/+", int64(*n))
	if err != nil {
		return err
	}
	rawRate, err := raw.rate(5 * time.Minute)
	raw.close()
	if err != nil {
		return err
	}
	t.add("raw paho subscriber (QoS 1, auto-ack, counts only)", *n, si(rawRate), "1.00", "", "", "", "", "", "")

	for _, delivery := range []string{"exactly_once", "at_least_once"} {
		row, err := e2eThroughput(bin, tmp, br, delivery, *n, *devices, rawRate)
		if err != nil {
			return err
		}
		t.add(row...)
	}
	for _, delivery := range []string{"exactly_once", "at_least_once"} {
		row, err := e2eLatency(bin, tmp, br, delivery, *rate, *dur, *devices, rawRate)
		if err != nil {
			return err
		}
		t.add(row...)
	}
	fmt.Printf("\n(b) end to end: mosquitto → eddy (MQTT QoS 1, ingest log %s, 1 s event-time windows, checkpoints every 10 s) → file sink; %d devices; publisher %s readings/s; %d CPUs, %s\n\n",
		e2eIngestAck, *devices, si(pubRate), runtime.NumCPU(), runtime.Version())
	t.write(os.Stdout)
	fmt.Println("\nThroughput rows drain a backlog queued at the broker while the consumer was down (rate between 10% and 90% of it);")
	fmt.Println("latency rows publish live at a fixed rate: latency = time the output record became visible − window end (the window's last reading was published just before its end).")
	return nil
}

// publishBacklog publishes n readings to prefix/dev-K and, when
// flushAheadMs > 0, one more stamped that far ahead so every window of the
// n fires. It returns the publish rate.
func publishBacklog(url, prefix string, devices, n int, flushAheadMs int64) (float64, error) {
	pub, err := newPublisher(url, "bench-pub-"+strings.ReplaceAll(prefix, "/", "-"), prefix, devices)
	if err != nil {
		return 0, err
	}
	defer pub.close()
	start := time.Now()
	if err := pub.publishBurst(n); err != nil {
		return 0, err
	}
	r := float64(n) / time.Since(start).Seconds()
	if flushAheadMs > 0 {
		if err := pub.publish(time.Now().UnixMilli() + flushAheadMs); err != nil {
			return 0, err
		}
		if err := pub.flush(); err != nil {
			return 0, err
		}
	}
	return r, nil
}

func sinkOutput(dir, delivery string) (cfgPath string, w *outputWatcher) {
	if delivery == "exactly_once" {
		d := filepath.Join(dir, "out")
		return d, newOutputWatcher("", d)
	}
	p := filepath.Join(dir, "out.jsonl")
	return p, newOutputWatcher(p, "")
}

func e2eThroughput(bin, tmp string, br *broker, delivery string, n, devices int, rawRate float64) ([]any, error) {
	progress("e2e: eddy %s, backlog of %d readings", delivery, n)
	dir := filepath.Join(tmp, "tput-"+delivery)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	prefix := "bench/tput-" + delivery
	out, w := sinkOutput(dir, delivery)
	cfg := e2eConfig(br.url(), "eddy-bench-tput-"+delivery, prefix+"/+", delivery, out)
	if err := registerSession(bin, dir, cfg); err != nil {
		return nil, err
	}
	if _, err := publishBacklog(br.url(), prefix, devices, n, 5000); err != nil {
		return nil, err
	}
	ag, err := startAgent(bin, dir, cfg)
	if err != nil {
		return nil, err
	}
	defer ag.kill()
	count := func() int64 {
		r, err := ag.pipeline("e2e")
		if err != nil {
			return 0
		}
		return int64(r.ReadingsIn)
	}
	cpu0, _ := sampleProc(ag.pid())
	r, err := rateBetween(count, int64(n), 5*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", delivery, err, ag.tail())
	}
	if err := ag.waitReadings("e2e", uint64(n+1), 2*time.Minute); err != nil {
		return nil, err
	}
	cpu1, _ := sampleProc(ag.pid())
	// Every window of the n readings has fired; the exactly-once sink shows
	// them at the next checkpoint.
	deadline := time.Now().Add(30 * time.Second)
	var sum float64
	var repeats int
	for time.Now().Before(deadline) {
		w.poll()
		if _, sum, repeats = w.totals(); int(sum) == n {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	rep, err := ag.pipeline("e2e")
	if err != nil {
		return nil, err
	}
	if err := ag.stop(); err != nil {
		return nil, err
	}
	ok := fmt.Sprintf("Σn=%d/%d, %d repeated ids", int(sum), n, repeats)
	return []any{"eddy, " + strings.ReplaceAll(delivery, "_", "-") + " file sink (throughput)", n, si(r),
		fmt.Sprintf("%.2f", r/rawRate), "", "", "", rep.Late + rep.Dropped + rep.DeadLettered, ok, cpuPercent(cpu0, cpu1)}, nil
}

func cpuPercent(a, b procSample) string {
	if b.at.Sub(a.at) <= 0 {
		return ""
	}
	return fmt.Sprintf("%.1f%%", 100*float64(b.cpu-a.cpu)/float64(b.at.Sub(a.at)))
}

func e2eLatency(bin, tmp string, br *broker, delivery string, rate int, d time.Duration, devices int, rawRate float64) ([]any, error) {
	progress("e2e: eddy %s, %d readings/s live for %v", delivery, rate, d)
	dir := filepath.Join(tmp, "lat-"+delivery)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	prefix := "bench/lat-" + delivery
	out, w := sinkOutput(dir, delivery)
	ag, err := startAgent(bin, dir, e2eConfig(br.url(), "eddy-bench-lat-"+delivery, prefix+"/+", delivery, out))
	if err != nil {
		return nil, err
	}
	defer ag.kill()
	if err := waitConnected(ag); err != nil {
		return nil, err
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			w.poll()
			time.Sleep(5 * time.Millisecond)
		}
	})
	pub, err := newPublisher(br.url(), "bench-pub-lat-"+delivery, prefix, devices)
	if err != nil {
		return nil, err
	}
	cpu0, _ := sampleProc(ag.pid())
	start := time.Now()
	sent, err := pub.publishPaced(rate, d, nil)
	pub.close()
	if err != nil {
		return nil, err
	}
	cpu1, _ := sampleProc(ag.pid())
	pubMs := time.Since(start).Seconds()
	// Let the last full checkpoint interval commit what fired.
	time.Sleep(12 * time.Second)
	stop.Store(true)
	wg.Wait()
	rep, err := ag.pipeline("e2e")
	if err != nil {
		return nil, err
	}
	if err := ag.stop(); err != nil {
		return nil, err
	}
	// Windows that closed while publishing went on (the last one never
	// fires: no later reading moves the watermark past it).
	endLimit := start.Add(d).UnixMilli() - 1000
	var lat []float64
	for _, r := range w.seen {
		if r.WindowEndMs <= endLimit {
			lat = append(lat, float64(r.at.UnixMilli()-r.WindowEndMs))
		}
	}
	sort.Float64s(lat)
	_, _, repeats := w.totals()
	ok := fmt.Sprintf("%d records, %d repeated ids, in %d/%d", len(w.seen), repeats, rep.ReadingsIn, sent)
	return []any{fmt.Sprintf("eddy, %s file sink (latency, %s/s live)", strings.ReplaceAll(delivery, "_", "-"), si(float64(rate))), sent,
		si(float64(sent) / pubMs), fmt.Sprintf("(%.2f)", float64(sent)/pubMs/rawRate),
		fmt.Sprintf("%.0f ms", percentile(lat, 0.5)), fmt.Sprintf("%.0f ms", percentile(lat, 0.99)), fmt.Sprintf("%.0f ms", percentile(lat, 1)),
		rep.Late + rep.Dropped + rep.DeadLettered, ok, cpuPercent(cpu0, cpu1)}, nil
}
