package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// outputRecord is the part of a window output record the benchmarks read.
type outputRecord struct {
	ID          string  `json:"id"`
	Key         string  `json:"key"`
	WindowEndMs int64   `json:"window_end_ms"`
	N           float64 `json:"n"`
}

// outputWatcher follows a sink's output as a consumer would see it: the
// file of an at-least-once file sink (path), or the committed part files of
// an exactly-once one (dir/part-*.jsonl; a part appears whole, by rename,
// at checkpoint completion). poll notes when each record became visible.
type outputWatcher struct {
	path, dir string
	offsets   map[string]int64 // bytes consumed per file
	partial   map[string][]byte
	seen      []visibleRecord
}

type visibleRecord struct {
	outputRecord
	at time.Time
}

func newOutputWatcher(path, dir string) *outputWatcher {
	return &outputWatcher{path: path, dir: dir, offsets: map[string]int64{}, partial: map[string][]byte{}}
}

func (w *outputWatcher) files() []string {
	if w.path != "" {
		return []string{w.path}
	}
	names, _ := filepath.Glob(filepath.Join(w.dir, "part-*.jsonl"))
	sort.Strings(names)
	return names
}

// poll reads what is new in every file and stamps its complete lines now.
func (w *outputWatcher) poll() {
	now := time.Now()
	for _, name := range w.files() {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		if _, err := f.Seek(w.offsets[name], 0); err != nil {
			f.Close()
			continue
		}
		var buf bytes.Buffer
		n, _ := buf.ReadFrom(f)
		f.Close()
		w.offsets[name] += n
		data := append(w.partial[name], buf.Bytes()...)
		for {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			var r outputRecord
			if json.Unmarshal(data[:i], &r) == nil && strings.Contains(r.ID, "/") {
				w.seen = append(w.seen, visibleRecord{r, now})
			}
			data = data[i+1:]
		}
		w.partial[name] = append([]byte(nil), data...)
	}
}

// totals returns the records seen, the sum of n over the last firing of
// each window, and how many ids appeared more than once.
func (w *outputWatcher) totals() (records int, sumN float64, repeats int) {
	ids := map[string]bool{}
	last := map[string]float64{} // key/window → n of its latest firing
	for _, r := range w.seen {
		if ids[r.ID] {
			repeats++
		}
		ids[r.ID] = true
		win := r.ID[:strings.LastIndexByte(r.ID, '/')]
		last[win] = r.N
	}
	for _, n := range last {
		sumN += n
	}
	return len(w.seen), sumN, repeats
}

// percentile returns the q-quantile (0..1) of sorted values, nearest rank.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}
