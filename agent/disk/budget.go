package agent

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/config"
)

// diskSampleInterval is how often the disk gauges are refreshed: walking a
// few directories is cheap, but not something to do per scrape or reading.
const diskSampleInterval = 5 * time.Second

// fsStats is what statfs says about a file system, in bytes.
type fsStats struct {
	size int64 // the file system's size
	free int64 // what an unprivileged process may still write
}

// freeBytes returns the bytes an unprivileged process may still write on
// the file system that holds path.
func freeBytes(path string) (int64, error) {
	st, err := fileSystemStats(path)
	return st.free, err
}

// defaultDiskBudget is the disk budget when max_disk is not set: half the
// size of data_dir's file system, but no more than what is free on it plus
// held, what Eddy already holds in data_dir (which it may reuse).
func defaultDiskBudget(st fsStats, held int64) int64 {
	return min(st.size/2, st.free+held)
}

// diskComponents are the eddy_disk_bytes components, in a fixed order.
var diskComponents = []string{config.DiskIngest, config.DiskWAL, config.DiskCheckpoints, config.DiskState, config.DiskSink}

// diskMeter samples the disk use of each component and the free space of
// data_dir's file system, for the eddy_disk_* gauges. Gauges read the last
// sample, so a scrape never walks a directory.
type diskMeter struct {
	dataDir string
	// paths are the directories (walked) or files of each component, by its
	// index in diskComponents. A file sink's output is its path: the
	// directory of an exactly_once sink, or the file and its rotated copies
	// (path.1, path.2, ...).
	paths  [][]string
	statfs func(string) (fsStats, error)
	budget atomic.Int64
	// derived: no max_disk, so the budget follows the file system
	// (defaultDiskBudget of each sample; see enforceBudget).
	derived bool
	usage   []atomic.Int64
	free    atomic.Int64
	size    atomic.Int64 // the file system's size, at the last sample
	// holds, if set, gets the budgetPlace hold while the components use
	// the whole budget (enforceBudget); log says when it starts and ends.
	holds *diskHolds
	log   *slog.Logger
}

// newDiskMeter lays out where a's components write.
func newDiskMeter(a *Agent, statfs func(string) (fsStats, error)) *diskMeter {
	dd := a.cfg.Agent.DataDir
	m := &diskMeter{dataDir: dd, statfs: statfs, usage: make([]atomic.Int64, len(diskComponents)), holds: &a.diskHolds, log: a.log,
		paths: [][]string{
			{filepath.Join(dd, "ingest")},
			{filepath.Join(dd, "wal")},
			{filepath.Join(dd, "checkpoints")},
			{filepath.Join(dd, "state")},
			nil,
		}}
	for _, s := range a.cfg.Sinks {
		if s.File != nil {
			m.paths[len(m.paths)-1] = append(m.paths[len(m.paths)-1], a.dataPath(s.File.Path))
		}
	}
	return m
}

// start takes the first sample and sets the budget: max_disk, or else
// defaultDiskBudget of data_dir's file system, with a warning when the
// components' own bounds add up to more. A file system whose size cannot be
// read (not Linux) leaves an unset budget at 0, reported as unknown.
func (m *diskMeter) start(cfg *config.Config, log *slog.Logger) {
	m.sample()
	m.budget.Store(cfg.Agent.MaxDiskBytes)
	defer m.enforceBudget()
	if cfg.Agent.MaxDiskBytes > 0 {
		return
	}
	st, err := m.statfs(m.dataDir)
	if err != nil {
		log.Warn("disk budget unknown: cannot read data_dir's file system; set agent { max_disk }", "data_dir", m.dataDir, "err", err)
		return
	}
	budget := defaultDiskBudget(st, treeBytes(m.dataDir))
	m.budget.Store(budget)
	m.derived = true
	shares := cfg.DiskShares()
	if total := config.DiskSharesTotal(shares); total > budget {
		log.Warn("disk budget: the components' own bounds add up to more than the budget derived from data_dir's file system; set agent { max_disk } or lower them",
			"bounds", config.FormatSize(total), "budget", config.FormatSize(budget),
			"fs_size", config.FormatSize(st.size), "fs_free", config.FormatSize(st.free), "shares", config.DescribeDiskShares(shares))
	}
}

// sample refreshes every component's use and the free space.
func (m *diskMeter) sample() {
	for i, paths := range m.paths {
		var n int64
		for _, p := range paths {
			n += pathBytes(p, i == len(m.paths)-1)
		}
		m.usage[i].Store(n)
	}
	if st, err := m.statfs(m.dataDir); err == nil {
		m.free.Store(st.free)
		m.size.Store(st.size)
	}
}

// run samples every diskSampleInterval until ctx ends, or less often when
// a sample takes long (an exactly_once file sink keeps a part file per
// checkpoint, so its directory grows without end): the wait is at least
// diskSampleCostFactor times the last sample's duration, which keeps the
// walks under 2% of a core.
func (m *diskMeter) run(ctx context.Context) {
	t := time.NewTimer(diskSampleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			start := time.Now()
			m.sample()
			m.enforceBudget()
			t.Reset(max(diskSampleInterval, diskSampleCostFactor*time.Since(start)))
		}
	}
}

// diskSampleCostFactor: see run.
const diskSampleCostFactor = 50

// register adds the eddy_disk_* gauges to set.
func (m *diskMeter) register(set *metrics.Set) {
	for i, c := range diskComponents {
		set.NewGauge(fmt.Sprintf(`eddy_disk_bytes{component=%q}`, c), func() float64 { return float64(m.usage[i].Load()) })
	}
	set.NewGauge("eddy_disk_budget_bytes", func() float64 { return float64(m.budget.Load()) })
	set.NewGauge("eddy_disk_free_bytes", func() float64 { return float64(m.free.Load()) })
}

// pathBytes is the size of the regular files under p (a directory) or of
// p (a file) and, with rotated, its rotated copies p.1, p.2, ...; 0 when p
// does not exist.
func pathBytes(p string, rotated bool) int64 {
	fi, err := os.Stat(p)
	if err == nil && fi.IsDir() {
		return treeBytes(p)
	}
	var n int64
	if err == nil {
		n = fi.Size()
	}
	if !rotated {
		return n
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	prefix := filepath.Base(p) + "."
	for _, e := range entries {
		suffix, ok := strings.CutPrefix(e.Name(), prefix)
		if _, err := strconv.Atoi(suffix); !ok || err != nil || !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err == nil {
			n += info.Size()
		}
	}
	return n
}

// treeBytes is the size of the regular files under dir. Files that vanish
// while it walks (a checkpoint collected) are skipped.
func treeBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone or unreadable: skip it, the figure is a gauge
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// report returns the last sample; nil on a nil meter (before run).
func (m *diskMeter) report() *admin.DiskReport {
	if m == nil {
		return nil
	}
	r := &admin.DiskReport{BudgetBytes: m.budget.Load(), FreeBytes: m.free.Load()}
	for i, c := range diskComponents {
		r.Components = append(r.Components, admin.DiskComponentUsage{Component: c, Bytes: m.usage[i].Load()})
	}
	return r
}
