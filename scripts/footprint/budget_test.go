//go:build linux

package footprint

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The footprint budgets (RELEASE.md). A change that exceeds one fails CI; raise
// a budget only with a reason in the commit, since the device's real job
// needs the room.
const (
	// MaxARM64BinaryBytes bounds the stripped linux/arm64 binary. It was
	// 15 MiB while the agent spoke MQTT 3.1.1 and JSON only; MQTT 5 on the
	// sources and sinks and Sparkplug B in and out (with its store and
	// forward) are what fleets run, and took it past that. 16 MiB still
	// catches what must not come in unnoticed: a second TLS stack or a
	// cloud SDK adds megabytes.
	MaxARM64BinaryBytes = 16 << 20
	// MaxQuickstartPeakRSSBytes bounds VmHWM of the quickstart (embedded
	// broker, simulator, one windowed pipeline) after QuickstartRun.
	MaxQuickstartPeakRSSBytes = 40 << 20
	// MaxIdleCPUFraction bounds the CPU an agent with a source but no
	// traffic uses, as a fraction of one core: 1% is 100 ms per 10 s, far
	// above what timers cost and far below any busy polling.
	MaxIdleCPUFraction = 0.01
)

// QuickstartRun is how long the quickstart runs before its peak RSS is
// read; EDDY_RSS_SECONDS overrides it for a quicker local check.
var QuickstartRun = 60 * time.Second

// IdleRun is how long the idle agent's CPU time is measured.
const IdleRun = 10 * time.Second

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

func TestBudget_BinarySize(t *testing.T) {
	dist := filepath.Dir(distBinary(t, "eddy-linux-arm64"))
	for _, name := range []string{"eddy-linux-amd64", "eddy-linux-arm64", "eddy-linux-armv7", "eddy-linux-armv6"} {
		fi, err := os.Stat(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("FIGURE binary %-18s %s (%d bytes)", name, mib(fi.Size()), fi.Size())
		if name == "eddy-linux-arm64" && fi.Size() > MaxARM64BinaryBytes {
			t.Errorf("BUDGET EXCEEDED: %s is %s, budget %s: find the dependency that grew (go version -m; go tool nm -size -sort size on an unstripped build)",
				name, mib(fi.Size()), mib(MaxARM64BinaryBytes))
		}
	}
}

// quickstartConfig is examples/quickstart.hcl as shipped, with the data_dir
// in the test's temp dir and free ports instead of fixed ones, so it cannot
// collide with another test or a running agent.
func quickstartConfig(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../examples/quickstart.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(data)
	for _, r := range [][2]string{
		{`data_dir = "./eddy-data"`, `data_dir = "%DIR%/data"` + "\n  admin = \"127.0.0.1:0\""},
		{`listen = "127.0.0.1:18830"`, `listen = "127.0.0.1:0"`},
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("examples/quickstart.hcl no longer has %s: update quickstartConfig", r[0])
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	return cfg
}

func TestBudget_QuickstartPeakRSS(t *testing.T) {
	bin := distBinary(t, "eddy-linux-amd64")
	t.Parallel()
	run := QuickstartRun
	if s := os.Getenv("EDDY_RSS_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("EDDY_RSS_SECONDS: %v", err)
		}
		run = time.Duration(n) * time.Second
	}
	a := startAgent(t, bin, quickstartConfig(t))
	wait(run)
	rss, err := PeakRSS(a.pid)
	if err != nil {
		t.Fatal(err)
	}
	lines := a.stdoutN.Load()
	a.stop(t)
	t.Logf("FIGURE quickstart peak RSS (VmHWM) after %v: %s; %d window results printed", run, mib(rss), lines)
	if lines == 0 {
		t.Fatalf("the quickstart printed no window results in %v: it is not doing its work, so its RSS means nothing:\n%s", run, a.logText())
	}
	if rss > MaxQuickstartPeakRSSBytes {
		t.Errorf("BUDGET EXCEEDED: quickstart peak RSS %s, budget %s", mib(rss), mib(MaxQuickstartPeakRSSBytes))
	}
}

// idleConfig has an embedded broker and an MQTT source subscribed to it
// with an event-time window, checkpoints and the admin endpoint on, and
// nothing publishing: every timer the agent keeps runs, no reading arrives.
const idleConfig = `
agent {
  data_dir = "%DIR%/data"
  admin    = "127.0.0.1:0"
}
broker { listen = "127.0.0.1:0" }
source "mqtt" "sensors" {
  broker = "embedded"
  topics = ["sensors/+/telemetry"]
  qos    = 1
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark { max_out_of_orderness = "2s" }
}
sink "stdout" "console" {}
pipeline "temp_1m" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to = [sink.stdout.console]
}
checkpoint { interval = "10s" }
`

func TestBudget_IdleCPU(t *testing.T) {
	bin := distBinary(t, "eddy-linux-amd64")
	t.Parallel()
	a := startAgent(t, bin, idleConfig)
	before, err := CPUTime(a.pid)
	if err != nil {
		t.Fatal(err)
	}
	wait(IdleRun)
	after, err := CPUTime(a.pid)
	if err != nil {
		t.Fatal(err)
	}
	a.stop(t)
	used := after - before
	frac := used.Seconds() / IdleRun.Seconds()
	t.Logf("FIGURE idle CPU: %v of CPU in %v = %.2f%% of a core (budget %.0f%%)", used, IdleRun, 100*frac, 100*MaxIdleCPUFraction)
	if frac > MaxIdleCPUFraction {
		t.Errorf("BUDGET EXCEEDED: an idle agent used %.2f%% of a core, budget %.0f%%: something polls", 100*frac, 100*MaxIdleCPUFraction)
	}
}
