//go:build linux

package footprint

import (
	"os"
	"testing"
)

func TestStatusField(t *testing.T) {
	status := []byte("Name:\teddy\nVmPeak:\t  1300 kB\nVmHWM:\t   13140 kB\nVmRSS:\t   13000 kB\n")
	io := []byte("rchar: 18015\nwchar: 49473\nwrite_bytes: 94208\ncancelled_write_bytes: 0\n")
	for _, tc := range []struct {
		name string
		data []byte
		key  string
		want int64
		err  bool
	}{
		{"VmHWM in kB", status, "VmHWM", 13140, false},
		{"prefix of another name does not match", status, "Vm", 0, true},
		{"write_bytes, not cancelled_write_bytes", io, "write_bytes", 94208, false},
		{"cancelled_write_bytes", io, "cancelled_write_bytes", 0, false},
		{"wchar", io, "wchar", 49473, false},
		{"missing", io, "read_bytes", 0, true},
		{"not a number", []byte("VmHWM: x kB\n"), "VmHWM", 0, true},
		{"no value", []byte("VmHWM:\n"), "VmHWM", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := statusField(tc.data, tc.key)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("statusField(%s) = %d, %v; want %d, error %v", tc.key, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestStatTicks(t *testing.T) {
	for _, tc := range []struct {
		name string
		stat string
		want int64
		err  bool
	}{
		{"plain", "4242 (eddy) S 1 4242 4242 0 -1 4194560 1 0 0 0 5 8 0 0 20 0 7 0 100 0 0", 13, false},
		{"name with spaces and parentheses", "7 (a) b (c) R 1 7 7 0 -1 0 0 0 0 0 120 30 0 0 20 0 1 0 5", 150, false},
		{"truncated", "7 (eddy) S 1 7", 0, true},
		{"no name", "7 eddy S", 0, true},
		{"bad number", "7 (eddy) S 1 7 7 0 -1 0 0 0 0 0 x 30 0", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := statTicks([]byte(tc.stat))
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("statTicks = %d, %v; want %d, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestProc_Self reads the counters of the test process itself, so the
// /proc formats the parsers assume are checked against the running kernel.
func TestProc_Self(t *testing.T) {
	pid := os.Getpid()
	if rss, err := PeakRSS(pid); err != nil || rss <= 0 {
		t.Fatalf("PeakRSS = %d, %v", rss, err)
	}
	if _, err := CPUTime(pid); err != nil {
		t.Fatal(err)
	}
	if io, err := ReadIO(pid); err != nil || io.WriteCalls < 0 {
		t.Fatalf("ReadIO = %+v, %v", io, err)
	}
}
