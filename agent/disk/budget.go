package disk

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

// SampleInterval is how often Run samples: walking a few directories is
// cheap, but not something to do per scrape or reading.
const SampleInterval = 5 * time.Second

// Stats is what statfs says about a file system, in bytes.
type Stats struct {
	Size int64 // the file system's size
	Free int64 // what an unprivileged process may still write
}

// FreeBytes returns the bytes an unprivileged process may still write on
// the file system that holds path (FileSystemStats' Free).
func FreeBytes(path string) (int64, error) {
	st, err := FileSystemStats(path)
	return st.Free, err
}

// defaultBudget is the disk budget when max_disk is not set: half the
// size of data_dir's file system, but no more than what is free on it plus
// held, what Eddy already holds in data_dir (which it may reuse).
func defaultBudget(st Stats, held int64) int64 {
	return min(st.Size/2, st.Free+held)
}

// components are the eddy_disk_bytes components, in a fixed order.
var components = []string{config.DiskIngest, config.DiskWAL, config.DiskCheckpoints, config.DiskState, config.DiskSink}

// Meter samples the disk use of each component and the free space of
// data_dir's file system, for the eddy_disk_* gauges and the status page,
// and holds ingest (BudgetPlace) while the components together use the
// whole budget. Gauges and Report read the last sample, so a scrape never
// walks a directory. Start must return before Run, Sample, Register's
// gauges or Report are used; after it, they are safe for concurrent use.
type Meter struct {
	dataDir string
	// paths are the directories (walked) or files of each component, by its
	// index in components. A file sink's output is its path: the
	// directory of an exactly_once sink, or the file and its rotated copies
	// (path.1, path.2, ...).
	paths  [][]string
	statfs func(string) (Stats, error)
	budget atomic.Int64
	// derived: no max_disk, so the budget follows the file system
	// (defaultBudget of each sample; see enforceBudget).
	derived bool
	usage   []atomic.Int64
	free    atomic.Int64
	size    atomic.Int64 // the file system's size, at the last sample
	// holds, if set, gets the BudgetPlace hold while the components use
	// the whole budget (enforceBudget); log says when it starts and ends.
	holds *Holds
	log   *slog.Logger // never nil
}

// NewMeter returns a meter of the components under dataDir (ingest/, wal/
// and sparkplug/, checkpoints/, state/) and of the file sinks' outputs sinkPaths (absolute:
// a file, with its rotated copies, or an exactly_once sink's directory),
// which reads file systems with statfs (FileSystemStats, but in tests).
// holds, if not nil, gets the BudgetPlace hold; log (nil: nothing is
// logged) says when it starts and ends, and warns about the budget.
// Nothing is read before Start.
func NewMeter(dataDir string, sinkPaths []string, statfs func(string) (Stats, error), holds *Holds, log *slog.Logger) *Meter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Meter{dataDir: dataDir, statfs: statfs, usage: make([]atomic.Int64, len(components)), holds: holds, log: log,
		paths: [][]string{
			{filepath.Join(dataDir, "ingest")},
			{filepath.Join(dataDir, "wal"), filepath.Join(dataDir, "sparkplug")}, // the Sparkplug sinks' logs too
			{filepath.Join(dataDir, "checkpoints")},
			{filepath.Join(dataDir, "state")},
			sinkPaths,
		}}
}

// Start takes the first sample and sets the budget: maxDisk (agent {
// max_disk }) when above 0, or else half of data_dir's file system but no
// more than its free space plus what data_dir holds, derived again at each
// later sample, with a warning when the components' own bounds (shares)
// add up to more. A file system whose size cannot be read (not Linux)
// leaves an unset budget at 0, reported as unknown, with a warning. The
// budget is enforced at once.
func (m *Meter) Start(maxDisk int64, shares []config.DiskShare) {
	m.measure()
	m.budget.Store(maxDisk)
	defer m.enforceBudget()
	if maxDisk > 0 {
		return
	}
	st, err := m.statfs(m.dataDir)
	if err != nil {
		m.log.Warn("disk budget unknown: cannot read data_dir's file system; set agent { max_disk }", "data_dir", m.dataDir, "err", err)
		return
	}
	budget := defaultBudget(st, treeBytes(m.dataDir))
	m.budget.Store(budget)
	m.derived = true
	if total := config.DiskSharesTotal(shares); total > budget {
		m.log.Warn("disk budget: the components' own bounds add up to more than the budget derived from data_dir's file system; set agent { max_disk } or lower them",
			"bounds", config.FormatSize(total), "budget", config.FormatSize(budget),
			"fs_size", config.FormatSize(st.Size), "fs_free", config.FormatSize(st.Free), "shares", config.DescribeDiskShares(shares))
	}
}

// Sample refreshes every component's use and the free space, then
// enforces the budget: holds ingest while the components use all of it,
// releases it once they use less. Run calls it every SampleInterval.
func (m *Meter) Sample() {
	m.measure()
	m.enforceBudget()
}

// measure refreshes every component's use and the free space.
func (m *Meter) measure() {
	for i, paths := range m.paths {
		var n int64
		for _, p := range paths {
			n += pathBytes(p, i == len(m.paths)-1)
		}
		m.usage[i].Store(n)
	}
	if st, err := m.statfs(m.dataDir); err == nil {
		m.free.Store(st.Free)
		m.size.Store(st.Size)
	}
}

// budgetReason is BudgetPlace's reason: "max_disk reached: X of Y in
// data_dir".
func budgetReason(used, budget int64, dataDir string) string {
	return fmt.Sprintf("max_disk reached: %s of %s in %s", admin.FormatBytes(used), admin.FormatBytes(budget), dataDir)
}

// overBudget reports whether used bytes take the whole budget; a budget of
// 0 (unknown) never does.
func overBudget(used, budget int64) bool { return budget > 0 && used >= budget }

// enforceBudget, after a sample, holds ingest (BudgetPlace) while the
// components' total reaches the budget, and releases it once retention,
// the WAL's drain or rotation brought it below. A derived budget (no
// max_disk) is derived again from the sample first: what is free now plus
// what Eddy holds, at most half the file system, so space an operator
// frees is Eddy's again without a restart.
func (m *Meter) enforceBudget() {
	var used int64
	for i := range m.usage {
		used += m.usage[i].Load()
	}
	if m.derived && m.size.Load() > 0 {
		m.budget.Store(defaultBudget(Stats{Size: m.size.Load(), Free: m.free.Load()}, used))
	}
	if m.holds == nil {
		return
	}
	budget := m.budget.Load()
	switch {
	case overBudget(used, budget):
		if m.holds.Hold(BudgetPlace, budgetReason(used, budget, m.dataDir)) {
			m.log.Warn("disk budget reached: ingest holds messages unacked at the broker until usage drops (checkpoint retention, the WAL's drain, file sink rotation)",
				"used", config.FormatSize(used), "max_disk", config.FormatSize(budget), "components", m.describeUsage())
		}
	case m.holds.Release(BudgetPlace):
		m.log.Info("disk usage below the budget again: ingest resumes", "used", config.FormatSize(used), "max_disk", config.FormatSize(budget))
	}
}

// describeUsage lists each component's last sampled use, for a log line.
func (m *Meter) describeUsage() string {
	parts := make([]string, len(components))
	for i, c := range components {
		parts[i] = c + " " + admin.FormatBytes(m.usage[i].Load())
	}
	return strings.Join(parts, ", ")
}

// Run calls Sample every SampleInterval until ctx ends, or less often when
// a sample takes long (an exactly_once file sink keeps a part file per
// checkpoint, so its directory grows without end): the wait is at least
// sampleCostFactor times the last sample's duration, which keeps the walks
// under 2% of a core.
func (m *Meter) Run(ctx context.Context) {
	t := time.NewTimer(SampleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			start := time.Now()
			m.Sample()
			t.Reset(max(SampleInterval, sampleCostFactor*time.Since(start)))
		}
	}
}

// sampleCostFactor: see Run.
const sampleCostFactor = 50

// Register adds the eddy_disk_* gauges to set: eddy_disk_bytes per
// component, eddy_disk_budget_bytes (0: unknown) and eddy_disk_free_bytes.
func (m *Meter) Register(set *metrics.Set) {
	for i, c := range components {
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

// Report returns the last sample, components in a fixed order (ingest,
// wal, checkpoints, state, sink); nil on a nil meter (before the agent
// runs).
func (m *Meter) Report() *admin.DiskReport {
	if m == nil {
		return nil
	}
	r := &admin.DiskReport{BudgetBytes: m.budget.Load(), FreeBytes: m.free.Load()}
	for i, c := range components {
		r.Components = append(r.Components, admin.DiskComponentUsage{Component: c, Bytes: m.usage[i].Load()})
	}
	return r
}
