//go:build linux

// Package footprint measures what a running eddy process costs its device,
// from Linux's /proc, and its tests hold the release to the footprint
// budgets (budget_test.go, RELEASE.md): the stripped arm64 binary, the peak
// RSS of the quickstart after 60 s and the CPU an idle agent burns. The SD
// card wear measurement (wear_test.go, scripts/footprint/wear.sh) reports
// the bytes an agent writes per hour at 1,000 readings/s.
//
// The measurements run the native amd64 release binary: under qemu they
// would measure the emulator. The tests skip unless EDDY_DIST names the
// directory scripts/build.sh wrote; scripts/test.sh sets it, so there an
// exceeded budget fails the run.
package footprint

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// clockTicksPerSecond is USER_HZ, the unit of utime and stime in
// /proc/PID/stat. Linux fixes it at 100 on every architecture Eddy targets;
// reading sysconf(_SC_CLK_TCK) would need cgo.
const clockTicksPerSecond = 100

// PeakRSS returns the peak resident set size of process pid in bytes
// (VmHWM in /proc/PID/status).
func PeakRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("footprint: peak RSS: %w", err)
	}
	kb, err := statusField(data, "VmHWM")
	if err != nil {
		return 0, fmt.Errorf("footprint: peak RSS of %d: %w", pid, err)
	}
	return kb << 10, nil
}

// CPUTime returns the CPU time process pid has used so far, user plus
// system (utime + stime in /proc/PID/stat), at the 10 ms resolution of
// clock ticks.
func CPUTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("footprint: CPU time: %w", err)
	}
	ticks, err := statTicks(data)
	if err != nil {
		return 0, fmt.Errorf("footprint: CPU time of %d: %w", pid, err)
	}
	return time.Duration(ticks) * time.Second / clockTicksPerSecond, nil
}

// IO is the storage traffic of a process so far, from /proc/PID/io.
type IO struct {
	// WriteBytes is what the process caused to be sent to storage
	// (write_bytes): page-cache pages it dirtied, counted when dirtied,
	// whether or not writeback has happened yet. This is the SD card wear.
	WriteBytes int64
	// CancelledWriteBytes is dirtied page cache that never reached storage
	// because the file was truncated or deleted first
	// (cancelled_write_bytes).
	CancelledWriteBytes int64
	// WriteCalls are the bytes passed to write-like system calls (wchar),
	// whether they reached storage or not (sockets, pipes, rewrites of a
	// dirty page).
	WriteCalls int64
}

// ReadIO returns the storage traffic of process pid so far. Reading another
// user's /proc/PID/io needs ptrace rights over it.
func ReadIO(pid int) (IO, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return IO{}, fmt.Errorf("footprint: I/O counters: %w", err)
	}
	var io IO
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"write_bytes", &io.WriteBytes}, {"cancelled_write_bytes", &io.CancelledWriteBytes}, {"wchar", &io.WriteCalls}} {
		if *f.dst, err = statusField(data, f.name); err != nil {
			return IO{}, fmt.Errorf("footprint: I/O counters of %d: %w", pid, err)
		}
	}
	return io, nil
}

// statusField returns the number after "name:" in a /proc file of
// "name: value [unit]" lines (status, io).
func statusField(data []byte, name string) (int64, error) {
	prefix := []byte(name + ":")
	for line := range bytes.Lines(data) {
		if rest, ok := bytes.CutPrefix(line, prefix); ok {
			f := bytes.Fields(rest)
			if len(f) == 0 {
				break
			}
			n, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("field %s: %w", name, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no field %s", name)
}

// statTicks returns utime + stime from the contents of /proc/PID/stat. The
// second field, the command name in parentheses, may itself hold spaces and
// parentheses, so fields are counted from the last ')'.
func statTicks(data []byte) (int64, error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, fmt.Errorf("stat %q: no command name", data)
	}
	// After the name: state(3) ppid(4) … utime(14) stime(15).
	f := bytes.Fields(data[end+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return 0, fmt.Errorf("stat %q: %d fields after the name, want > %d", data, len(f), stime)
	}
	var sum int64
	for _, i := range []int{utime, stime} {
		n, err := strconv.ParseInt(string(f[i]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat field %d: %w", i+3, err)
		}
		sum += n
	}
	return sum, nil
}
