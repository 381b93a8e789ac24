package main

import (
	"io/fs"
	"path/filepath"
	"strings"
)

// fileClasses are the agent's kinds of file, by where they live under the
// run's directory: data_dir's ingest log, checkpoints, WAL, and the file
// sink's output. Everything else the agent writes — the working bbolt
// files, rewritten in place and flushed by the kernel — is the remainder
// of its write_bytes.
var fileClasses = []struct{ name, dir string }{
	{"ingest", "data/ingest"},
	{"checkpoints", "data/checkpoints"},
	{"wal", "data/wal"},
	{"sink", "out"},
}

// fileWrites estimates the bytes written per file class from the sizes
// files reach: every file in these classes is append-only or written once
// (segments, content-addressed snapshot files, manifests, part files), so
// the largest size a file is seen with is what was written to it. A file
// created and deleted between two scans is missed; at a scan a second that
// is a temp file renamed at once, counted under its final name.
type fileWrites struct {
	root string
	max  map[string]int64 // path → largest size seen
}

func newFileWrites(root string) *fileWrites { return &fileWrites{root: root, max: map[string]int64{}} }

// scan records the current size of every file of every class.
func (w *fileWrites) scan() {
	for _, c := range fileClasses {
		_ = filepath.WalkDir(filepath.Join(w.root, c.dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(p, ".lock") || strings.HasSuffix(p, "LOCK") {
				return nil
			}
			if fi, err := d.Info(); err == nil && fi.Size() > w.max[p] {
				w.max[p] = fi.Size()
			}
			return nil
		})
	}
}

// snapshot returns the bytes written per class so far.
func (w *fileWrites) snapshot() map[string]int64 {
	out := map[string]int64{}
	for p, n := range w.max {
		for _, c := range fileClasses {
			if strings.HasPrefix(p, filepath.Join(w.root, c.dir)+string(filepath.Separator)) {
				out[c.name] += n
			}
		}
	}
	return out
}

// rssTrend summarises RSS samples taken once a second: the mean over the
// last minute and the slope after the first minute (MiB per minute, least
// squares), which is about 0 when memory is flat.
func rssTrend(at []float64, rss []int64) (lastMinuteMean, slopePerMin float64) {
	if len(at) == 0 {
		return 0, 0
	}
	end := at[len(at)-1]
	var sum float64
	var n int
	for i := range at {
		if at[i] >= end-60 {
			sum += float64(rss[i])
			n++
		}
	}
	lastMinuteMean = sum / float64(n)
	var sx, sy, sxx, sxy float64
	var m float64
	for i := range at {
		if at[i] < at[0]+60 && end-at[0] > 120 {
			continue // the first minute is warm-up, when there is more
		}
		x, y := at[i]/60, float64(rss[i])/(1<<20)
		sx, sy, sxx, sxy, m = sx+x, sy+y, sxx+x*x, sxy+x*y, m+1
	}
	if d := m*sxx - sx*sx; m >= 2 && d != 0 {
		slopePerMin = (m*sxy - sx*sy) / d
	}
	return lastMinuteMean, slopePerMin
}
