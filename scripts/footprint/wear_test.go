//go:build linux

package footprint

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// wearConfig runs the reference load: 1,000 readings/s from 100
// simulated sensors through the embedded broker into one-minute event-time
// windows on bbolt state, results to an exactly-once file sink, checkpoints
// every 10 s.
const wearConfig = `
agent {
  data_dir = "%DIR%/data"
  admin    = ""
}
broker { listen = "127.0.0.1:0" }
source "simulator" "sim" {
  devices = 100
  rate    = 1000
}
sink "file" "out" {
  path     = "%DIR%/out"
  delivery = "exactly_once"
}
pipeline "temp_1m" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" {
    size             = "1m"
    allowed_lateness = "10s"
  }
  aggregate {
    n        = count()
    avg_temp = avg(event.temp)
    max_temp = max(event.temp)
    p95_temp = percentile(event.temp, 0.95)
  }
  to = [sink.file.out]
}
checkpoint { interval = "10s" }
ingest {
  ack           = "%ACK%"
  sync_interval = "%SYNC%"
  linger        = "%LINGER%"
  compression   = "%COMPRESSION%"
}
`

var checkpointBytes = regexp.MustCompile(`msg="checkpoint completed".* bytes=(\d+)`)

// TestWear_WriteBytesPerHour measures the SD card wear of wearConfig: the
// bytes the agent makes the kernel write to storage (write_bytes of
// /proc/PID/io, less cancelled_write_bytes) over EDDY_WEAR_SECONDS after a
// 15 s warm-up, scaled to an hour, for the default ingest settings and for
// variations of ack, linger and compression (the ingest log is the largest
// writer). It runs only when EDDY_WEAR_SECONDS is
// set (scripts/footprint/wear.sh), since a meaningful figure takes minutes.
// The data_dir must be on a disk-backed file system: tmpfs writes nothing.
// With EDDY_WEAR_FILES=1 it also attributes the writes to files and
// directories (fileWrites: perf on an ext4 tracepoint, needs root).
func TestWear_WriteBytesPerHour(t *testing.T) {
	bin := distBinary(t, "eddy-linux-amd64")
	secs, _ := strconv.Atoi(os.Getenv("EDDY_WEAR_SECONDS"))
	if secs <= 0 {
		t.Skip("EDDY_WEAR_SECONDS is unset: run scripts/footprint/wear.sh")
	}
	run := time.Duration(secs) * time.Second
	for _, mode := range []struct{ name, ack, sync, linger, compression string }{
		{"default", "after_fsync", "100ms", "100ms", "zstd"}, // survives power loss
		{"after_fsync_linger_10ms", "after_fsync", "100ms", "10ms", "zstd"},
		{"after_fsync_linger_0", "after_fsync", "100ms", "0s", "zstd"},
		{"after_fsync_uncompressed", "after_fsync", "100ms", "100ms", "none"},
		{"after_fsync_s2", "after_fsync", "100ms", "100ms", "s2"},
		{"after_write_100ms", "after_write", "100ms", "100ms", "zstd"}, // survives a crash; power loss may lose 100 ms
		{"after_write_1s", "after_write", "1s", "100ms", "zstd"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel() // separate processes: /proc/PID/io counts each alone
			cfg := strings.NewReplacer("%ACK%", mode.ack, "%SYNC%", mode.sync, "%LINGER%", mode.linger,
				"%COMPRESSION%", mode.compression).Replace(wearConfig)
			measureWear(t, bin, cfg, run)
		})
	}
}

func measureWear(t *testing.T, bin, cfg string, run time.Duration) {
	a := startAgent(t, bin, cfg)
	wait(15 * time.Second) // first windows open, first checkpoint written
	before, err := ReadIO(a.pid)
	if err != nil {
		t.Fatal(err)
	}
	var byFile map[string]int64
	if os.Getenv("EDDY_WEAR_FILES") == "1" {
		byFile, err = fileWrites(t, a.dir, run)
		if err != nil {
			t.Fatalf("per-file accounting (perf): %v", err)
		}
	} else {
		wait(run)
	}
	after, err := ReadIO(a.pid)
	if err != nil {
		t.Fatal(err)
	}
	a.stop(t)
	disk := (after.WriteBytes - after.CancelledWriteBytes) - (before.WriteBytes - before.CancelledWriteBytes)
	calls := after.WriteCalls - before.WriteCalls
	perHour := func(n int64) int64 { return int64(float64(n) * float64(time.Hour) / float64(run)) }
	var ckpts, ckptBytes int64
	for _, m := range checkpointBytes.FindAllStringSubmatch(a.logText(), -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		ckpts++
		ckptBytes += n
	}
	t.Logf("FIGURE wear %s over %v at 1,000 readings/s, checkpoints every 10 s: %s written to storage (%s per hour); write calls %s (%s per hour)",
		t.Name(), run, mib(disk), mib(perHour(disk)), mib(calls), mib(perHour(calls)))
	if ckpts > 0 {
		t.Logf("FIGURE wear %s: %d checkpoints in the whole run, %s on average each (snapshot files written)", t.Name(), ckpts, mib(ckptBytes/ckpts))
	}
	if byFile != nil {
		reportFileWrites(t, byFile, run)
	}
}
