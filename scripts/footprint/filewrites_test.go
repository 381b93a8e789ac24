//go:build linux

package footprint

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// writepagesLine matches perf's text for ext4:ext4_writepages_result: the
// pages ext4 sent to storage for one inode in one writeback pass, whether
// an fsync or the kernel's background flusher started it.
var writepagesLine = regexp.MustCompile(`\s(\d+)\.(\d+): ext4:ext4_writepages_result: dev \S+ ino (\d+) .*pages_written (\d+)`)

// scanEvery is how often fileWrites maps inodes to paths; an event counts
// for a path if it falls between one period before the inode was first
// seen there and one period after it was last seen, so a freed inode
// number that another process's file had, or gets, is not counted.
const scanEvery = 250 * time.Millisecond

// seenFile is where and when an inode was seen under the directory, on
// CLOCK_MONOTONIC (perf records on the same clock).
type seenFile struct {
	name        string
	first, last time.Duration
}

func monotonic() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}

// fileWrites attributes the storage writes under dir to its files for the
// duration d: it records the ext4:ext4_writepages_result tracepoint system
// wide with perf (so it needs perf and the right to trace, and dir on
// ext4) while it maps inode numbers to paths under dir every 250 ms, so
// files deleted during the run (sealed ingest segments, old checkpoints)
// are still named. The result is bytes per path relative to dir; pages of
// inodes outside dir (other processes) are left out.
func fileWrites(t *testing.T, dir string, d time.Duration) (map[string]int64, error) {
	out := filepath.Join(t.TempDir(), "perf.data")
	perf := exec.Command("perf", "record", "-q", "-a", "-k", "CLOCK_MONOTONIC", "-e", "ext4:ext4_writepages_result", "-o", out,
		"--", "sleep", strconv.Itoa(int(d.Seconds())))
	perf.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var perfErr bytes.Buffer
	perf.Stderr = &perfErr
	if err := perf.Start(); err != nil {
		return nil, err
	}
	names := map[uint64]*seenFile{}
	var mu sync.Mutex
	scan := func() {
		now := monotonic()
		filepath.WalkDir(dir, func(path string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return nil
			}
			info, err := de.Info()
			if err != nil {
				return nil
			}
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				rel, _ := filepath.Rel(dir, path)
				mu.Lock()
				if f := names[st.Ino]; f != nil && f.name == rel {
					f.last = now
				} else if f == nil {
					names[st.Ino] = &seenFile{name: rel, first: now, last: now}
				}
				mu.Unlock()
			}
			return nil
		})
	}
	done := make(chan error, 1)
	go func() { done <- perf.Wait() }()
	tick := time.NewTicker(scanEvery)
	defer tick.Stop()
	scan()
wait:
	for {
		select {
		case err := <-done:
			if err != nil {
				return nil, err
			}
			break wait
		case <-tick.C:
			scan()
		}
	}
	scan()
	text, err := exec.Command("perf", "script", "-i", out).Output()
	if err != nil {
		return nil, err
	}
	page := int64(os.Getpagesize())
	byPath := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		m := writepagesLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		sec, _ := strconv.ParseInt(m[1], 10, 64)
		frac, _ := strconv.ParseInt((m[2] + "000000000")[:9], 10, 64)
		at := time.Duration(sec)*time.Second + time.Duration(frac)
		ino, _ := strconv.ParseUint(m[3], 10, 64)
		pages, _ := strconv.ParseInt(m[4], 10, 64)
		if f, ok := names[ino]; ok && at >= f.first-scanEvery && at <= f.last+scanEvery {
			byPath[f.name] += pages * page
		}
	}
	return byPath, nil
}

// fileGroup names what a path under the wear test's directory belongs to:
// data/ingest, data/checkpoints, data/state, data/wal, the sink's out/, ...
func fileGroup(rel string) string {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "data":
		return parts[0] + "/" + parts[1]
	case len(parts) >= 2:
		return parts[0]
	}
	return rel
}

// reportFileWrites logs the bytes per group and their per-hour rate.
func reportFileWrites(t *testing.T, byPath map[string]int64, d time.Duration) {
	groups := map[string]int64{}
	files := map[string]int{}
	var total int64
	for p, n := range byPath {
		groups[fileGroup(p)] += n
		files[fileGroup(p)]++
		total += n
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return groups[keys[i]] > groups[keys[j]] })
	perHour := func(n int64) int64 { return int64(float64(n) * float64(time.Hour) / float64(d)) }
	for _, k := range keys {
		t.Logf("FIGURE wear %s by file: %-18s %s over %v (%s per hour, %d files)", t.Name(), k, mib(groups[k]), d, mib(perHour(groups[k])), files[k])
	}
	t.Logf("FIGURE wear %s by file: total attributed %s over %v (%s per hour)", t.Name(), mib(total), d, mib(perHour(total)))
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Slice(paths, func(i, j int) bool { return byPath[paths[i]] > byPath[paths[j]] })
	for _, p := range paths[:min(len(paths), 5)] {
		t.Logf("wear %s: top file %s: %s", t.Name(), p, mib(byPath[p]))
	}
}
