package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
)

// TestState_ReadCheckpointsSpareTheWorkingFile: 20,000 keys, each with a
// window open all day, updated in turn, under the smallest state cache
// (1 MiB, a fraction of the state), a checkpoint every 100 ms. Reading
// misses from the checkpoint files, the bbolt working file is written
// (almost) nothing: every change the cache lets go is in a checkpoint
// file already. Keeping a whole copy instead (read_checkpoints = false),
// the same run writes every update back into it.
func TestState_ReadCheckpointsSpareTheWorkingFile(t *testing.T) {
	written := map[bool]float64{}
	for _, read := range []bool{true, false} {
		t.Run(fmt.Sprintf("read_checkpoints=%v", read), func(t *testing.T) {
			dir := t.TempDir()
			a := startAgent(t, dir, `
agent {
  device_id = "wear"
  data_dir  = "%DATA%"
  admin     = "127.0.0.1:0"
}
broker { listen = "127.0.0.1:0" }
source "simulator" "sim" {
  devices = 20000
  rate    = 20000
}
sink "file" "out" { path = "%DIR%/out.jsonl" }
pipeline "p" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "1d"
  }
  aggregate {
    n   = count()
    sum = sum(event.temp)
  }
  to = [sink.file.out]
}
state {
  cache            = "1MiB"
  read_checkpoints = `+fmt.Sprint(read)+`
}
checkpoint { interval = "100ms" }
`)
			const in, done = `eddy_readings_in_total{pipeline="p"}`, "eddy_checkpoints_completed_total"
			var m map[string]float64
			var base float64
			await.Until(t, 2*time.Minute, func() error {
				m = scrapeMetrics(t, a)
				if base == 0 {
					base = m[done]
				}
				// Each key updated three times, and checkpoints since.
				if m[in] >= 60000 && m[done] >= base+5 {
					return nil
				}
				return fmt.Errorf("%v readings in, %v checkpoints", m[in], m[done])
			})
			written[read] = m[`eddy_state_file_written_bytes{pipeline="p"}`]
			if reads := m[`eddy_state_checkpoint_reads{pipeline="p"}`]; read != (reads > 0) {
				t.Errorf("%v lookups answered by the checkpoint files", reads)
			}
			t.Logf("%v readings, working file written %.0f bytes, %v lookups answered by the checkpoint files, %v bytes in memory, keys %v", m[in], written[read],
				m[`eddy_state_checkpoint_reads{pipeline="p"}`], m[`eddy_state_memory_bytes{pipeline="p"}`], m[`eddy_state_keys{pipeline="p"}`])
			if log, _ := os.ReadFile(filepath.Join(dir, "agent.log")); strings.Contains(string(log), "restarting from the last checkpoint") {
				t.Fatal("the pipeline restarted")
			}
		})
	}
	if t.Failed() {
		return
	}
	if written[false] < 4<<20 {
		t.Fatalf("with a whole copy the working file took only %.0f bytes: the state fits the cache, the test shows nothing", written[false])
	}
	if written[true] > written[false]/20 {
		t.Fatalf("reading from the checkpoint files, the working file took %.0f bytes, with a whole copy %.0f: want under a twentieth", written[true], written[false])
	}
}
