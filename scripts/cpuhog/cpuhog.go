// Package cpuhog keeps a machine's cores busy for a test, as other work on
// a gateway would: one child process per core, each a shell spinning in an
// empty loop at the test's own priority. The children are killed by PID
// when the test ends.
package cpuhog

import (
	"os/exec"
	"runtime"
	"testing"
)

// Start starts n spinning children (runtime.NumCPU() when n <= 0) and
// stops them at the test's cleanup.
func Start(tb testing.TB, n int) {
	tb.Helper()
	if n <= 0 {
		n = runtime.NumCPU()
	}
	for range n {
		cmd := exec.Command("/bin/sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			tb.Fatalf("cpuhog: %v", err)
		}
		tb.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}
