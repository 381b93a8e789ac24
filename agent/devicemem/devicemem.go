// Package devicemem tells how much memory the device gives this process:
// its physical RAM or, when lower, the memory limit of its cgroup (a
// container's limit, a systemd unit's MemoryMax), read from Linux's /proc
// and /sys files. The agent derives its default Go memory limit and state
// cache from it.
package devicemem

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"strconv"
	"strings"
)

// Total returns the memory available to the process, in bytes, and false
// when neither RAM nor a cgroup limit can be read (not Linux).
func Total() (int64, bool) { return total(os.ReadFile) }

// total is Total reading files through read.
func total(read func(string) ([]byte, error)) (int64, bool) {
	ram, ok := memTotal(read)
	if limit, found := cgroupLimit(read); found && (!ok || limit < ram) {
		return limit, true
	}
	return ram, ok
}

// memTotal reads MemTotal from /proc/meminfo.
func memTotal(read func(string) ([]byte, error)) (int64, bool) {
	b, err := read("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil || kb <= 0 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}

// cgroupLimit returns the memory limit of the process's cgroup (v2's
// memory.max, else v1's memory.limit_in_bytes), if it sets one. The
// cgroup's path comes from /proc/self/cgroup; inside a container, whose
// cgroup namespace makes its own cgroup the root, the root's file is the
// one.
func cgroupLimit(read func(string) ([]byte, error)) (int64, bool) {
	var v2, v1 string
	if b, err := read("/proc/self/cgroup"); err == nil {
		for line := range strings.Lines(string(b)) {
			// hierarchy-ID:controllers:path
			f := strings.SplitN(strings.TrimSpace(line), ":", 3)
			if len(f) != 3 {
				continue
			}
			switch {
			case f[0] == "0" && f[1] == "":
				v2 = f[2]
			case strings.Contains(","+f[1]+",", ",memory,"):
				v1 = f[2]
			}
		}
	}
	candidates := []string{
		path.Join("/sys/fs/cgroup", v2, "memory.max"),
		"/sys/fs/cgroup/memory.max",
		path.Join("/sys/fs/cgroup/memory", v1, "memory.limit_in_bytes"),
		"/sys/fs/cgroup/memory/memory.limit_in_bytes",
	}
	for _, p := range candidates {
		b, err := read(p)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, false // v2: no limit
		}
		n, err := strconv.ParseInt(s, 10, 64)
		// v1 writes "no limit" as a huge number (the page-rounded int64 max).
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// DefaultGoLimit is the Go memory limit an agent sets when its
// configuration names none: a quarter of the device's memory, at most 256
// MiB (and 256 MiB when the device's memory is unknown). It is a soft
// limit: the garbage collector works harder as the heap nears it, so an
// idle heap is returned to the device before it swaps or the OOM killer
// acts; it never fails an allocation.
func DefaultGoLimit(total int64, known bool) int64 {
	const most = 256 << 20
	if !known {
		return most
	}
	return min(total/4, most)
}

// DefaultStateCache is the state { cache } an agent uses when its
// configuration names none: an eighth of the Go memory limit, between 4
// and 32 MiB (32 MiB from a 256 MiB limit, i.e. a device of 1 GiB or more;
// 16 MiB on a 512 MiB one).
func DefaultStateCache(goLimit int64) int64 {
	return min(max(goLimit/8, 4<<20), 32<<20)
}
