package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/eddy-edge/eddy/scripts/loopback"
)

// stateConfig is the agent of benchmarks (d) and (e): the simulator
// publishes one reading for each of keys devices (round robin) to the
// embedded broker, and a processing-time tumbling window of one day keeps
// one open window per device, so the state holds keys windows (plus their
// timers) and nothing fires during the run. Checkpoints are taken on request
// only (interval 1h): the savepoint is the full checkpoint measured.
func stateConfig(keys, brokerPort int, out string) string {
	return fmt.Sprintf(`
agent {
  device_id  = "bench"
  data_dir   = "%%DATA%%"
  admin      = "%%ADMIN%%"
  log_format = "json"
}
broker { listen = "127.0.0.1:%d" }
source "simulator" "sim" {
  devices      = %d
  rate         = 200000
  max_readings = %d
}
sink "file" "out" { path = %q }
pipeline "state" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "1d"
  }
  aggregate {
    n    = count()
    sum  = sum(event.temp)
    max  = max(event.temp)
    last = last(event.temp)
  }
  to = [sink.file.out]
}
checkpoint {
  interval = "1h"
  timeout  = "10m"
}
# Loading only: one simulator connection waits for each reading's log
# append, so after_fsync caps it at 1/fsync latency. The checkpoint and the
# restore measured do not depend on it.
ingest { ack = "after_write" }
`, brokerPort, keys, keys, out)
}

type stateResult struct {
	keys          int
	loadRate      float64
	ckpt          checkpointRecord
	stateWindows  float64 // eddy_state_windows after the savepoint
	stateFile     float64 // eddy_state_file_bytes after the savepoint
	stateMemory   float64 // eddy_state_memory_bytes after the savepoint
	restoreMs     int64   // eddy run start → "restored checkpoint" logged
	readyMs       int64   // eddy run start → admin answering
	readyCPU      time.Duration
	readyPeakRSS  int64
	restoredBytes string
}

// loadState starts an agent, loads keys keys, takes a savepoint and stops
// it; with restore it then starts the agent again on the same data_dir and
// times the restore.
func loadState(bin, tmp string, keys int, restore bool) (stateResult, error) {
	res := stateResult{keys: keys}
	dir := filepath.Join(tmp, fmt.Sprintf("state-%d", keys))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	port, err := loopback.Port()
	if err != nil {
		return res, err
	}
	cfg := stateConfig(keys, port, filepath.Join(dir, "out.jsonl"))
	progress("state: loading %d keys", keys)
	ag, err := startAgent(bin, dir, cfg)
	if err != nil {
		return res, err
	}
	start := time.Now()
	if err := ag.waitReadings("state", uint64(keys), 10*time.Minute); err != nil {
		ag.kill()
		return res, err
	}
	res.loadRate = float64(keys) / time.Since(start).Seconds()
	id, err := ag.savepoint()
	if err != nil {
		ag.kill()
		return res, err
	}
	rep, err := ag.checkpoints()
	if err != nil {
		ag.kill()
		return res, err
	}
	for _, c := range rep.History {
		if c.ID == id {
			res.ckpt = c
		}
	}
	// The state gauges, sampled by the subtasks at the savepoint's barrier.
	if res.stateWindows, err = ag.metric(`eddy_state_windows{pipeline="state"}`); err != nil {
		ag.kill()
		return res, err
	}
	if res.stateFile, err = ag.metric(`eddy_state_file_bytes{pipeline="state"}`); err != nil {
		ag.kill()
		return res, err
	}
	if res.stateMemory, err = ag.metric(`eddy_state_memory_bytes{pipeline="state"}`); err != nil {
		ag.kill()
		return res, err
	}
	if err := ag.stop(); err != nil {
		return res, err
	}
	if !restore {
		return res, nil
	}
	progress("state: restoring %d keys", keys)
	logPath := filepath.Join(dir, "agent.log")
	os.Remove(logPath)
	// Watch the log from before the start: the line's time in the log is
	// the agent's wall clock, which need not agree with ours to the ms.
	seen := make(chan time.Time, 1)
	stopWatch := make(chan struct{})
	go func() {
		want := []byte(`"msg":"restored checkpoint"`)
		for {
			select {
			case <-stopWatch:
				return
			default:
			}
			if b, err := os.ReadFile(logPath); err == nil && bytes.Contains(b, want) {
				seen <- time.Now()
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	defer close(stopWatch)
	started := time.Now()
	ag, err = startAgent(bin, dir, cfg)
	if err != nil {
		return res, err
	}
	defer ag.kill()
	res.readyMs = time.Since(started).Milliseconds()
	// CPU time says what the restore costs on a loaded machine, where wall
	// time mostly measures the other processes.
	if ps, err := sampleProc(ag.pid()); err == nil {
		res.readyCPU, res.readyPeakRSS = ps.cpu, ps.peakRSS
	}
	select {
	case at := <-seen:
		res.restoreMs = at.Sub(started).Milliseconds()
	case <-time.After(5 * time.Minute):
		return res, fmt.Errorf("no \"restored checkpoint\" in the log: %s", ag.tail())
	}
	if _, fields, ok := ag.logLine("restored checkpoint"); ok {
		if b, ok := fields["bytes"].(float64); ok {
			res.restoredBytes = mib(b)
		}
	}
	return res, ag.stop()
}

func stateRuns(args []string, name string, restore bool) ([]stateResult, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	sizes := fs.String("keys", "10000,100000,1000000", "state sizes in keys (one open window each)")
	keep := fs.String("keep", "", "keep the agents' directories (config, data_dir, log) in `dir` instead of a temporary one")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	tmp := *keep
	if tmp == "" {
		var err error
		if tmp, err = os.MkdirTemp("", "eddybench-"+name+"-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
	} else if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	bin, err := buildEddy(tmp)
	if err != nil {
		return nil, err
	}
	var out []stateResult
	for _, s := range splitList(*sizes) {
		var keys int
		if _, err := fmt.Sscan(s, &keys); err != nil {
			return nil, fmt.Errorf("-keys %q: %w", s, err)
		}
		r, err := loadState(bin, tmp, keys, restore)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func runCheckpoint(args []string) error {
	rs, err := stateRuns(args, "checkpoint", false)
	if err != nil {
		return err
	}
	t := newTable("keys (open windows)", "checkpoint kind", "duration", "size", "bytes/key", "load rate (simulator → embedded broker → state)",
		"eddy_state_windows", "eddy_state_file_bytes", "eddy_state_memory_bytes")
	for _, r := range rs {
		t.add(r.keys, r.ckpt.Kind, fmt.Sprintf("%d ms", r.ckpt.DurationMs), mib(float64(r.ckpt.SizeBytes)),
			fmt.Sprintf("%.0f", float64(r.ckpt.SizeBytes)/float64(r.keys)), si(r.loadRate)+"/s",
			fmt.Sprintf("%.0f", r.stateWindows), mib(r.stateFile), mib(r.stateMemory))
	}
	fmt.Printf("\n(d) checkpoint (a savepoint: full, self-contained) against state size; state on bbolt, 4 aggregates per window; duration from /api/checkpoints; %d CPUs, %s\n\n",
		runtime.NumCPU(), runtime.Version())
	t.write(os.Stdout)
	return nil
}

func runRestore(args []string) error {
	rs, err := stateRuns(args, "restore", true)
	if err != nil {
		return err
	}
	t := newTable("keys (open windows)", "checkpoint size", "start → \"restored checkpoint\"", "start → admin up", "CPU time until admin up", "peak RSS")
	for _, r := range rs {
		t.add(r.keys, strings.TrimSpace(r.restoredBytes), fmt.Sprintf("%d ms", r.restoreMs), fmt.Sprintf("%d ms", r.readyMs),
			fmt.Sprintf("%d ms", r.readyCPU.Milliseconds()), mib(float64(r.readyPeakRSS)))
	}
	fmt.Printf("\n(e) restore time against state size: eddy run on the data_dir of (d)'s run after SIGTERM (newest local checkpoint); %d CPUs, %s\n\n",
		runtime.NumCPU(), runtime.Version())
	t.write(os.Stdout)
	return nil
}
