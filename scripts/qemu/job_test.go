package qemu

// The real job the release tests run on every architecture: a file source →
// event-time tumbling windows, a pipeline of per-key functions and one of
// report_by_exception, all on bbolt state → an exactly-once file sink,
// checkpointing every 20 ms (often enough that even the native binary
// completes checkpoints long before the end of the input).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

const jobConfig = `
agent {
  device_id   = "release"
  data_dir    = "%[1]s/data"
  admin       = ""
  parallelism = 2
}
source "file" "in" {
  path = "%[2]s"
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark { max_out_of_orderness = "5s" }
}
sink "file" "out" {
  path     = "%[1]s/out"
  delivery = "exactly_once"
}
pipeline "sums" {
  from = source.file.in
  key  = event.device
  window "tumbling" { size = "10s" }
  aggregate {
    n   = count()
    sum = sum(event.v)
    max = max(event.v)
    avg = avg(event.v)
  }
  to = [sink.file.out]
}
pipeline "changes" {
  from   = source.file.in
  key    = event.device
  filter = changed(event.v > 950)
  map {
    v    = event.v
    was  = prev(event.v)
    up   = delta(event.v)
    seen = count_key()
  }
  to = [sink.file.out]
}
pipeline "reports" {
  from = source.file.in
  key  = event.device
  report_by_exception {
    value     = event.v
    deadband  = 900
    heartbeat = "60s"
  }
  to = [sink.file.out]
}
checkpoint {
  interval = "20ms"
}
`

// job is one run directory of the real job: its config, data_dir and
// output directory, shared by every process that continues it.
type job struct {
	dir, config string
}

func newJob(t *testing.T, input string) job {
	t.Helper()
	dir := t.TempDir()
	j := job{dir: dir, config: filepath.Join(dir, "agent.hcl")}
	if err := os.WriteFile(j.config, []byte(fmt.Sprintf(jobConfig, dir, input)), 0o644); err != nil {
		t.Fatal(err)
	}
	return j
}

// writeReadings writes the job's input: devices × perDevice readings, one
// per device per second, out of order by up to 4 s (inside the 5 s bound, so
// none is late and the result does not depend on timing).
func writeReadings(t *testing.T, path string, devices, perDevice int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	rng := rand.New(rand.NewPCG(8, 9))
	base := int64(1_700_000_000_000)
	for i := 0; i < perDevice; i++ {
		for d := 0; d < devices; d++ {
			fmt.Fprintf(w, `{"device":"dev-%d","ts":%d,"v":%d}`+"\n", d, base+int64(i)*1000+rng.Int64N(4000), rng.IntN(1000))
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// runToEnd runs the job on target until its input ends and returns the log.
func (j job) runToEnd(t *testing.T, dist string, target Target) string {
	t.Helper()
	cmd := target.Command(dist, "run", "-c", j.config)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: eddy run: %v\n%s", target, err, out)
	}
	return string(out)
}

// runUntilCheckpoint starts the job on target, waits for its first completed
// checkpoint (the "checkpoint completed" log line, written after the
// manifest is durable) and sends sig. For SIGTERM it waits for the clean
// exit, which takes a final checkpoint. It fails the test when the process
// ends before the checkpoint: then the input is too short to interrupt.
func (j job) runUntilCheckpoint(t *testing.T, dist string, target Target, sig syscall.Signal) string {
	t.Helper()
	cmd := target.Command(dist, "run", "-c", j.config)
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	var mu sync.Mutex
	checkpointed := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.Contains(sc.Text(), `msg="checkpoint completed"`) {
				once.Do(func() { close(checkpointed) })
			}
		}
	}()
	select {
	case <-checkpointed:
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	case <-drained:
	}
	<-drained
	err = cmd.Wait()
	mu.Lock()
	defer mu.Unlock()
	select {
	case <-checkpointed:
	default:
		t.Fatalf("%s: the job ended (%v) before its first checkpoint; lengthen the input:\n%s", target, err, log.String())
	}
	if sig == syscall.SIGKILL {
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("%s: the job ended (%v) before the SIGKILL:\n%s", target, err, log.String())
		}
	} else if err != nil {
		t.Fatalf("%s: after %v: %v\n%s", target, sig, err, log.String())
	}
	return log.String()
}

// committed returns the records in the job's committed part files, in
// order, and fails on a duplicated id.
func (j job) committed(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(j.dir, "out", "part-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	var lines []string
	seen := map[string]bool{}
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if line == "" {
				continue
			}
			var r struct{ ID string }
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s: bad record %q: %v", n, line, err)
			}
			if seen[r.ID] {
				t.Fatalf("duplicated record %s in committed output", r.ID)
			}
			seen[r.ID] = true
			lines = append(lines, line)
		}
	}
	return lines
}
