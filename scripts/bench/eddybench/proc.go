package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// clockTicksPerSecond is USER_HZ, the unit of utime and stime in
// /proc/PID/stat: 100 on every Linux Eddy targets (sysconf would need cgo).
const clockTicksPerSecond = 100

// procSample is what /proc says about a process at one moment.
type procSample struct {
	at         time.Time
	cpu        time.Duration // utime + stime
	peakRSS    int64         // VmHWM, bytes
	rss        int64         // VmRSS, bytes
	writeBytes int64         // /proc/PID/io write_bytes: bytes sent to the block layer
}

func sampleProc(pid int) (procSample, error) {
	s := procSample{at: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	if s.cpu, err = parseStatCPU(stat); err != nil {
		return s, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	kb, err := field(status, "VmHWM:")
	if err != nil {
		return s, err
	}
	s.peakRSS = kb << 10
	if kb, err = field(status, "VmRSS:"); err != nil {
		return s, err
	}
	s.rss = kb << 10
	io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return s, err
	}
	s.writeBytes, err = field(io, "write_bytes:")
	return s, err
}

// parseStatCPU returns utime + stime from /proc/PID/stat. The command name
// (field 2) may hold spaces and parentheses, so fields count from the last
// ')': utime and stime are fields 14 and 15, the 12th and 13th after it.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat: no ')' in %q", stat)
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the name", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicksPerSecond, nil
}

// field returns the first number after name at the start of a line.
func field(data []byte, name string) (int64, error) {
	for _, line := range bytes.Split(data, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte(name)); ok {
			f := bytes.Fields(rest)
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(string(f[0]), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc: no %s", name)
}
