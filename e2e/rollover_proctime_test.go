package e2e

// The rollover of a pipeline on processing time, through the binary: the
// cut lies after the restart (or the reload), each reading goes to the
// definition on its side of the cut by the arrival the ingest log
// recorded, and a replay after a SIGKILL routes it the same way.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// procRollConfig: readings through the embedded broker (so through the
// ingest log), a tumbling window of %SIZE% on processing time whose
// aggregates name the readings they hold (their sequence numbers: count,
// sum, lowest and highest), %MORE% aggregates besides.
const procRollConfig = `
broker { listen = "%BROKER%" }
agent {
  device_id   = "proll"
  data_dir    = "%DATA%"
  admin       = ""
  parallelism = 2
}
source "mqtt" "sensors" {
  broker = "embedded"
  topics = ["sensors/+/telemetry"]
  qos    = 1
}
sink "file" "out" {
  path     = "%DIR%/out"
  delivery = "exactly_once"
}
pipeline "sums" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "%SIZE%"
  }
  aggregate {
    n  = count()
    s  = sum(event.seq)
    lo = min(event.seq)
    hi = max(event.seq)
%MORE%  }
  to = [sink.file.out]
}
checkpoint { interval = "300ms" }
`

// procRollResult is one committed window result of procRollConfig.
type procRollResult struct {
	Definition    string   `json:"definition"`
	Key           string   `json:"key"`
	WindowStartMs int64    `json:"window_start_ms"`
	WindowEndMs   int64    `json:"window_end_ms"`
	Kind          string   `json:"kind"`
	N, S, Lo, Hi  float64  `json:"-"`
	SQ            *float64 `json:"sq"`
}

// TestRollover_ProcessingTimeExactlyOnce changes a processing-time
// pipeline fed through the embedded broker while readings keep coming: an
// aggregate added, the window's size changed, or both by SIGHUP. Validate
// says what run then logs, word for word; run, SIGKILLed at random moments
// during the rollover and restarted, never fails. The committed results
// are each one window of one definition, emitted once: those before the
// cut the old definition's (its hash, its size, no new aggregate), those
// from it the new one's; every reading published is counted exactly once
// across both (the count and the sum of the sequence numbers match what
// was published), and the old definition's readings all precede the new
// one's (one publisher: arrivals follow the sequence).
func TestRollover_ProcessingTimeExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		sighup         bool
		size, more     string
		line           string
		newSize        int64
		withAggregates bool
	}{
		{name: "add an aggregate", size: "2s", more: "    sq = sum(event.sq)\n", newSize: 2_000, withAggregates: true,
			line: "roll over: aggregates changed (sq added): its open windows finish as before; windows from the first boundary of both the old and the new windows on processing time after the start use the new aggregates"},
		{name: "window size 2s to 4s", size: "4s", newSize: 4_000,
			line: "roll over: window changed (size 2s → 4s): its open windows finish as before; windows from the first boundary of both the old and the new windows on processing time after the start use the new window"},
		{name: "SIGHUP: size and an aggregate", sighup: true, size: "4s", more: "    sq = sum(event.sq)\n", newSize: 4_000, withAggregates: true,
			line: "roll over: window changed (size 2s → 4s), aggregates changed (sq added): its open windows finish as before; windows from the first boundary of both the old and the new windows on processing time after the start use the new window and aggregates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			procTimeRollover(t, tc.sighup, tc.size, tc.more, tc.line, tc.newSize, tc.withAggregates)
		})
	}
}

// procRollCut finds in a run's log the cut it rolls over at: the cut
// attribute of a rollover that starts, or the time a resumed one names;
// ok false when the log names none (the rollover had ended).
var (
	procRollFresh   = regexp.MustCompile(`msg="restore: pipeline \\"sums\\": roll over: [^"]*" pipeline=sums cut=(\S+)`)
	procRollResumed = regexp.MustCompile(`msg="restore: pipeline \\"sums\\": roll over \(resumed\): [^"]*windows from (\S+) use the new definition"`)
)

func procRollCut(t *testing.T, log string) (int64, bool) {
	t.Helper()
	m := procRollFresh.FindStringSubmatch(log)
	if m == nil {
		m = procRollResumed.FindStringSubmatch(log)
	}
	if m == nil {
		return 0, false
	}
	at, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		t.Fatal(err)
	}
	return at.UnixMilli(), true
}

func procTimeRollover(t *testing.T, sighup bool, size, more, line string, newSize int64, withAggregates bool) {
	addr := loopback.Addr(t)
	dir := t.TempDir()
	old := replaceAll(procRollConfig, "%BROKER%", addr, "%SIZE%", "2s", "%MORE%", "")
	next := replaceAll(procRollConfig, "%BROKER%", addr, "%SIZE%", size, "%MORE%", more)
	path := writeConfig(t, dir, old)
	p := startEddy(t, "run", "-c", path)
	if !p.waitLog("eddy started", 30*time.Second) {
		t.Fatalf("run did not start within 30 s:\n%s", p.output())
	}

	// One publisher, 4 devices, a batch every 20 ms, until stopped: the
	// readings keep coming through every restart (the sensor connects
	// again and re-sends what was not acknowledged).
	sensor := newReconnectingSensor("tcp://"+addr, "proll-sensor")
	if err := sensor.connect(); err != nil {
		t.Fatal(err)
	}
	var published atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var pubErr error
	wg.Go(func() {
		defer sensor.close()
		seq := 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			var topics, payloads []string
			for d := range 4 {
				topics = append(topics, "sensors/"+strconv.Itoa(d)+"/telemetry")
				payloads = append(payloads, fmt.Sprintf(`{"device":"dev-%d","seq":%d,"sq":%d}`, d, seq, seq*seq))
				seq++
			}
			if err := sensor.publish(topics, payloads); err != nil {
				pubErr = err
				return
			}
			published.Store(int64(seq))
			time.Sleep(20 * time.Millisecond) // pacing: the readings' rate, not a wait for a condition
		}
	})
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	// The old definition has windows open and checkpoints of them.
	await.True(t, 30*time.Second, "a checkpoint of the old definition with readings", func() bool {
		return published.Load() >= 400 && strings.Count(p.output(), "checkpoint completed") >= 3
	})
	if sighup {
		writeConfig(t, dir, next)
		p.signal(syscall.SIGHUP)
		if !p.waitLog(`msg="restore: pipeline \"sums\": `+line+`"`, 30*time.Second) {
			t.Fatalf("the reload does not roll the pipeline over with %q:\n%s", line, p.output())
		}
	} else {
		p.kill()
		writeConfig(t, dir, next)
		stdout, stderr, code := runSplit(t, "validate", "-c", path)
		if code != 0 || !strings.Contains(stdout, "\n  pipeline \"sums\": "+line+"\n") {
			t.Fatalf("validate: exit %d, stderr %q, want the line %q:\n%s", code, stderr, line, stdout)
		}
		p = startEddy(t, "run", "-c", path)
		if !p.waitLog(`msg="restore: pipeline \"sums\": `+line+`"`, 30*time.Second) {
			t.Fatalf("run does not log what validate said (%q):\n%s", line, p.output())
		}
	}
	cut, ok := procRollCut(t, p.output())
	if !ok {
		t.Fatalf("the rollover logs no cut:\n%s", p.output())
	}

	// SIGKILLs at random moments of the rollover (which lasts until about
	// a second past the cut), each run restarted at once.
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	kills := 0
	var earlier strings.Builder // the logs of the runs killed
	for kills < 3 || time.Now().UnixMilli() < cut+1_500 {
		if p.wait(time.Duration(rng.Int64N(int64(1500 * time.Millisecond)))) {
			t.Fatalf("run exited: %v\n%s", p.err, p.output())
		}
		p.kill()
		kills++
		earlier.WriteString(p.output())
		p = startEddy(t, "run", "-c", path)
		if !p.waitLog("eddy started", 30*time.Second) {
			t.Fatalf("run did not start within 30 s:\n%s", p.output())
		}
		if c, ok := procRollCut(t, p.output()); ok {
			cut = c // a run killed before its first checkpoint: the next cuts anew
		}
		if kills > 12 {
			t.Fatal("the rollover does not end")
		}
	}
	if !await.Holds(30*time.Second, func() bool {
		logs := earlier.String() + p.output()
		return strings.Contains(logs, "rollover: the old definition has finished its windows and retires") ||
			strings.Contains(logs, `restore; its previous definition has finished its windows`)
	}) {
		t.Fatalf("the old definition does not retire:\n%s", p.output())
	}
	await.True(t, 10*time.Second, "readings after the rollover", func() bool {
		return time.Now().UnixMilli() > cut+3_000
	})
	close(stop)
	wg.Wait()
	if pubErr != nil {
		t.Fatal(pubErr)
	}
	n := published.Load()

	var got []procRollResult
	await.True(t, 60*time.Second, "every reading committed", func() bool {
		got = procRollResults(t, filepath.Join(dir, "out"))
		var total float64
		for _, r := range got {
			total += r.N
		}
		return int64(total) >= n
	})
	p.stop(syscall.SIGTERM, 20*time.Second)
	if p.err != nil {
		t.Fatalf("run exited with %v", p.err)
	}
	got = procRollResults(t, filepath.Join(dir, "out"))
	checkProcRoll(t, got, n, cut, newSize, withAggregates)
	t.Logf("%d readings, %d results, cut %s, %d kills during the rollover", n, len(got), time.UnixMilli(cut).UTC().Format(time.RFC3339Nano), kills)
}

// procRollResults reads the committed results (each id once).
func procRollResults(t *testing.T, dir string) []procRollResult {
	t.Helper()
	var out []procRollResult
	for _, line := range committedRecords(t, dir) {
		var r procRollResult
		var raw map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			t.Fatal(err)
		}
		r.N, _ = raw["n"].(float64)
		r.S, _ = raw["s"].(float64)
		r.Lo, _ = raw["lo"].(float64)
		r.Hi, _ = raw["hi"].(float64)
		out = append(out, r)
	}
	return out
}

// checkProcRoll checks the results of a rollover at cut of n published
// readings (sequence numbers 0 to n−1) from 2 s windows to windows of
// newSize, with the sq aggregate from the cut when withAggregates.
func checkProcRoll(t *testing.T, got []procRollResult, n, cut, newSize int64, withAggregates bool) {
	t.Helper()
	var count, sum float64
	defs := map[bool]map[string]bool{false: {}, true: {}} // by side: from the cut
	windows := map[string]bool{}
	oldHi, newLo := -1.0, float64(n)
	for _, r := range got {
		count += r.N
		sum += r.S
		from := r.WindowStartMs >= cut
		defs[from][r.Definition] = true
		w := fmt.Sprintf("%s %s %d-%d", r.Definition, r.Key, r.WindowStartMs, r.WindowEndMs)
		if windows[w] {
			t.Errorf("window %s emitted twice", w)
		}
		windows[w] = true
		if r.Kind != "final" {
			t.Errorf("window %s: a %s firing on processing time", w, r.Kind)
		}
		size := int64(2_000)
		if from {
			size = newSize
			newLo = min(newLo, r.Lo)
		} else {
			oldHi = max(oldHi, r.Hi)
			if r.WindowEndMs > cut {
				t.Errorf("window %s of the old definition holds the cut %d", w, cut)
			}
		}
		if r.WindowEndMs-r.WindowStartMs != size || r.WindowStartMs%size != 0 {
			t.Errorf("window %s is not one of its definition's (%d ms)", w, size)
		}
		if hasSQ := r.SQ != nil; hasSQ != (from && withAggregates) {
			t.Errorf("window %s: sq present %v, from the cut %v", w, hasSQ, from)
		}
	}
	if count != float64(n) || sum != float64(n*(n-1)/2) {
		t.Errorf("the results count %v readings summing to %v; %d were published, summing to %d", count, sum, n, n*(n-1)/2)
	}
	if len(defs[false]) != 1 || len(defs[true]) != 1 {
		t.Fatalf("definitions before the cut %v, from it %v: want one each", defs[false], defs[true])
	}
	for d := range defs[false] {
		if defs[true][d] {
			t.Errorf("both sides of the cut name definition %s", d)
		}
	}
	if oldHi >= newLo {
		t.Errorf("the old definition counted reading %v, the new one reading %v: the readings are not split at one arrival", oldHi, newLo)
	}
}
