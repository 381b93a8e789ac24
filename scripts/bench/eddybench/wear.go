package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/eddy-edge/eddy/scripts/loopback"
)

// wearVariant is one checkpoint policy the wear benchmark runs.
type wearVariant struct {
	name, checkpointLines, stateLines string
}

// wearResult is what one variant wrote and uploaded over whole compaction
// cycles: from just after one full checkpoint to the next full one
// included, so that a base rewrite is counted once per cycle as in a long
// run.
type wearResult struct {
	variant      string
	checkpoints  int   // in the cycles measured
	bases        int   // full checkpoints among them
	incrBytes    int64 // snapshot bytes of the incremental checkpoints
	ckptBytes    int64 // snapshot bytes of every checkpoint
	baseBytes    int64 // of ckptBytes, the new bases: full checkpoints, or compaction's merge output
	ingestBytes  int64 // appended to the ingest log's segments
	workingBytes int64 // written to the bbolt working file (eddy_state_file_written_bytes)
	smallBytes   int64 // manifests, temporary and staging files under data_dir
	diskBytes    int64 // /proc/PID/io write_bytes: everything the process wrote
	elapsed      time.Duration
	cpu          time.Duration // the agent's CPU time over the cycles
	peakRSS      int64         // the agent's VmHWM at the end
	uploadBytes  int64         // eddy_upload_bytes_total
	chainMaxRead int64         // the largest chain (what a restore reads)
}

// wearCheckpointConfig turns (d)'s loading config into the measured one:
// the simulator goes on at change×keys readings per interval (round robin,
// so each interval changes that share of the keys' windows), checkpoints
// every interval with the variant's policy, uploads to gw.
func wearCheckpointConfig(keys, port int, out string, change float64, interval time.Duration, v wearVariant, gw *versitygw) string {
	rate := change * float64(keys) / interval.Seconds()
	cfg := stateConfig(keys, port, out)
	cfg = strings.Replace(cfg, "  rate         = 200000\n", fmt.Sprintf("  rate         = %g\n", rate), 1)
	cfg = strings.Replace(cfg, fmt.Sprintf("  max_readings = %d\n", keys), "", 1)
	cfg = strings.Replace(cfg, "  interval = \"1h\"\n", fmt.Sprintf("  interval = %q\n%s", interval.String(), v.checkpointLines), 1)
	// One S3 prefix per variant; the device id stays the loaded data_dir's,
	// which the agent refuses to change.
	return cfg + strings.Replace(gw.uploadBlock(),
		`bucket     = "eddy"`, fmt.Sprintf("bucket     = \"eddy\"\n  prefix     = \"wear-%s/\"", v.name), 1)
}

// measureWear starts the agent on a copy of a loaded data_dir and measures
// whole cycles until at least minCheckpoints are covered. A cycle ends
// with a new base: a full checkpoint, or a chain merged in the background
// (logged), whose bytes no checkpoint's size includes.
func measureWear(bin, dir string, cfg string, minCheckpoints int, minDuration time.Duration, v wearVariant) (wearResult, error) {
	res := wearResult{variant: v.name}
	ag, err := startAgent(bin, dir, cfg)
	if err != nil {
		return res, err
	}
	defer ag.kill()
	seen := map[uint64]checkpointRecord{}
	var newest uint64
	// bases are the new bases so far: checkpoint id → bytes written.
	bases := map[uint64]int64{}
	poll := func() error {
		rep, err := ag.checkpoints()
		if err != nil {
			return err
		}
		for _, c := range rep.History {
			if _, ok := seen[c.ID]; !ok && c.Aborted == "" {
				seen[c.ID] = c
				newest = max(newest, c.ID)
				if c.Kind == "full" {
					bases[c.ID] = c.SizeBytes
				}
			}
		}
		for _, f := range ag.logLines("checkpoint chains merged into a new base") {
			through, _ := f["through"].(float64)
			b, _ := f["bytes"].(float64)
			bases[uint64(through)] = int64(b)
		}
		return nil
	}
	ingest := newGrowthWatcher(filepath.Join(dir, "data", "ingest"))
	small := newGrowthWatcher(filepath.Join(dir, "data"))
	small.skip = isSnapshotOrWorkingOrIngest
	deadline := time.Now().Add(30*time.Minute + minDuration)
	// waitBase waits for a new base of a checkpoint after id and returns
	// the first one's id.
	waitBase := func(after uint64) (uint64, error) {
		for time.Now().Before(deadline) {
			if err := poll(); err != nil {
				return 0, err
			}
			ingest.poll()
			small.poll()
			var first uint64
			for id := range bases {
				if id > after && (first == 0 || id < first) {
					first = id
				}
			}
			if first != 0 {
				return first, nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return 0, fmt.Errorf("no new base within 30 minutes: %s", ag.tail())
	}
	startID, err := waitBase(0)
	if err != nil {
		return res, err
	}
	progress("wear %s: cycle starts after the base of checkpoint %d", v.name, startID)
	if err := waitUploaded(ag, startID, deadline); err != nil {
		return res, err
	}
	up0, _ := ag.metric("eddy_upload_bytes_total")
	upID0, _ := ag.metric("eddy_upload_last_id")
	ps0, err := sampleProc(ag.pid())
	if err != nil {
		return res, err
	}
	const working = `eddy_state_file_written_bytes{pipeline="state"}`
	work0, err := ag.metric(working)
	if err != nil {
		return res, err
	}
	ingest.reset()
	small.reset()
	t0 := time.Now()
	endID := startID
	for endID-startID < uint64(minCheckpoints) || time.Since(t0) < minDuration {
		if endID, err = waitBase(endID); err != nil {
			return res, err
		}
	}
	ps1, err := sampleProc(ag.pid())
	if err != nil {
		return res, err
	}
	res.elapsed = time.Since(t0)
	ingest.poll()
	small.poll()
	// The gauge is sampled at checkpoints, the base's one included by now.
	work1, err := ag.metric(working)
	if err != nil {
		return res, err
	}
	res.workingBytes = int64(work1 - work0)
	progress("wear %s: %d checkpoints measured, up to the base of checkpoint %d", v.name, endID-startID, endID)
	// A merged base is uploaded with the first checkpoint after the merge.
	if err := waitUploaded(ag, newest+1, deadline); err != nil {
		return res, err
	}
	up1, _ := ag.metric("eddy_upload_bytes_total")
	upID1, _ := ag.metric("eddy_upload_last_id")
	if err := res.countCheckpoints(seen, bases, startID, endID); err != nil {
		return res, err
	}
	res.diskBytes = ps1.writeBytes - ps0.writeBytes
	res.cpu, res.peakRSS = ps1.cpu-ps0.cpu, ps1.peakRSS
	res.ingestBytes = ingest.grown()
	res.smallBytes = small.grown()
	// The uploader has shipped a few checkpoints more than the cycle by
	// then: scale its bytes to the cycle's checkpoints.
	if n := upID1 - upID0; n > 0 {
		res.uploadBytes = int64((up1 - up0) / n * float64(res.checkpoints))
	}
	return res, nil
}

// countCheckpoints adds the checkpoints after startID up to endID, and
// the new bases among them, to res.
func (res *wearResult) countCheckpoints(seen map[uint64]checkpointRecord, bases map[uint64]int64, startID, endID uint64) error {
	for id := startID + 1; id <= endID; id++ {
		c, ok := seen[id]
		if !ok {
			return fmt.Errorf("checkpoint %d missing from /api/checkpoints (polled too slowly)", id)
		}
		res.checkpoints++
		if b, ok := bases[id]; ok {
			res.bases++
			res.ckptBytes += b
			res.baseBytes += b
		}
		if c.Kind != "full" {
			res.incrBytes += c.SizeBytes
			res.ckptBytes += c.SizeBytes
		}
		res.chainMaxRead = max(res.chainMaxRead, c.FullBytes)
	}
	return nil
}

// waitUploaded waits until checkpoint id (or a later one) is uploaded.
func waitUploaded(ag *agentProc, id uint64, deadline time.Time) error {
	for time.Now().Before(deadline) {
		if got, err := ag.metric("eddy_upload_last_id"); err == nil && uint64(got) >= id {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("checkpoint %d not uploaded in time: %s", id, ag.tail())
}

// growthWatcher adds up what is appended to the files under a directory
// (append-only segments, removed whole): per file the largest size seen
// less its size at reset.
type growthWatcher struct {
	dir        string
	skip       func(path string) bool // files another class counts
	base, high map[string]int64
}

// isSnapshotOrWorkingOrIngest tells the files the wear table counts in
// classes of their own (snapshot files by their checkpoints' sizes, the
// working file by its metric, the ingest log by its own watcher) from
// the rest of data_dir: manifests, temporary and staging files.
func isSnapshotOrWorkingOrIngest(p string) bool {
	base := filepath.Base(p)
	return strings.HasSuffix(base, ".snap") || strings.HasSuffix(base, ".snap.tmp") ||
		strings.HasSuffix(base, ".db") || strings.Contains(p, string(filepath.Separator)+"ingest"+string(filepath.Separator))
}

func newGrowthWatcher(dir string) *growthWatcher {
	w := &growthWatcher{dir: dir}
	w.reset()
	return w
}

func (w *growthWatcher) sizes() map[string]int64 {
	m := map[string]int64{}
	_ = filepath.WalkDir(w.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (w.skip == nil || !w.skip(p)) {
			if fi, err := d.Info(); err == nil {
				m[p] = fi.Size()
			}
		}
		return nil
	})
	return m
}

func (w *growthWatcher) reset() { w.base, w.high = w.sizes(), map[string]int64{} }

func (w *growthWatcher) poll() {
	for p, n := range w.sizes() {
		w.high[p] = max(w.high[p], n)
	}
}

func (w *growthWatcher) grown() int64 {
	var n int64
	for p, h := range w.high {
		n += max(0, h-w.base[p])
	}
	return n
}

func runWear(args []string) error {
	fs := flag.NewFlagSet("wear", flag.ContinueOnError)
	keys := fs.Int("keys", 1_000_000, "state size in keys (one open window each)")
	change := fs.Float64("change", 0.01, "share of the keys changed per checkpoint")
	interval := fs.Duration("interval", time.Second, "checkpoint interval of the run; figures per hour are scaled to -hour-interval")
	hourInterval := fs.Duration("hour-interval", 10*time.Second, "the checkpoint interval the per-hour figures assume")
	minCkpts := fs.Int("checkpoints", 30, "measure whole cycles (full checkpoint to full checkpoint) covering at least this many checkpoints")
	minDur := fs.Duration("duration", 0, "and lasting at least this long (with -interval 10s -duration 10m: the real interval, no scaling)")
	variants := fs.String("variants", "before,after", "before: a full snapshot every 10 checkpoints (full_every = 10) and a whole copy of the state in the working file; copy: the default max_chain_ratio (1.5), still a whole copy (read_checkpoints = false); after: the defaults, misses read from the checkpoint files")
	cache := fs.String("cache", "", "state { cache } of the measured runs (default: sized to the device, at most 32MiB): the write-back cache sets how many dirty entries one write-back of the working file gathers")
	keep := fs.String("keep", "", "keep the agents' directories in `dir` instead of a temporary one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	all := map[string]wearVariant{
		"before": {"before", "  full_every = 10\n  max_chain_ratio = 1000\n", "  read_checkpoints = false\n"},
		"copy":   {"copy", "", "  read_checkpoints = false\n"},
		"after":  {"after", "", ""},
	}
	tmp := *keep
	if tmp == "" {
		var err error
		if tmp, err = os.MkdirTemp("", "eddybench-wear-"); err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
	}
	bin, gw, err := eddyAndS3(tmp)
	if err != nil {
		return err
	}
	defer gw.stop()
	if _, err := loadState(bin, tmp, *keys, false); err != nil {
		return err
	}
	loaded := filepath.Join(tmp, fmt.Sprintf("state-%d", *keys))
	var rs []wearResult
	for _, name := range splitList(*variants) {
		v, ok := all[name]
		if !ok {
			return fmt.Errorf("-variants: unknown %q", name)
		}
		dir := filepath.Join(tmp, "wear-"+name)
		os.RemoveAll(dir)
		if out, err := exec.Command("cp", "-a", loaded, dir).CombinedOutput(); err != nil {
			return fmt.Errorf("copy the loaded state: %v: %s", err, out)
		}
		port, err := loopback.Port()
		if err != nil {
			return err
		}
		cfg := wearCheckpointConfig(*keys, port, filepath.Join(dir, "out.jsonl"), *change, *interval, v, gw)
		if st := v.stateLines; *cache != "" || st != "" {
			if *cache != "" {
				st += fmt.Sprintf("  cache = %q\n", *cache)
			}
			cfg += "state {\n" + st + "}\n"
		}
		progress("wear %s: %d keys, %.1f%% changed per checkpoint", name, *keys, 100**change)
		r, err := measureWear(bin, dir, cfg, *minCkpts, *minDur, v)
		if err != nil {
			return err
		}
		rs = append(rs, r)
		os.RemoveAll(dir)
	}
	perHour := float64(time.Hour / *hourInterval)
	t := newTable("policy", "checkpoints (full or merged)", "run", "changed entries", "increments", "new bases", "ingest log", "bbolt working file", "manifests, temp, staging", "all files", "write_bytes", "write_bytes − files", "uploaded",
		"snapshots written + uploaded ÷ changed", "all files ÷ changed", "write_bytes ÷ changed", "uploaded ÷ changed", "largest chain (restore reads)", "CPU (of one core)", "peak RSS")
	for _, r := range rs {
		n := float64(r.checkpoints)
		h := func(b int64) string { return mib(float64(b)/n*perHour) + "/h" }
		incrs := r.checkpoints
		if strings.Contains(all[r.variant].checkpointLines, "full_every") {
			incrs -= r.bases // its bases are full checkpoints, not increments
		}
		changed := float64(r.incrBytes) / float64(incrs) * n
		// write_bytes counts what the kernel dirties: a page of the working
		// file rewritten before writeback once, but with large folios (ext4
		// on Linux 6.18 here) a whole folio per 4 KiB write, of which
		// writeback sends only the dirty blocks. So the files' own
		// bytes are the wear figure, and the difference is shown.
		files := r.ckptBytes + r.ingestBytes + r.workingBytes + r.smallBytes
		t.add(r.variant, fmt.Sprintf("%d (%d)", r.checkpoints, r.bases), r.elapsed.Round(time.Second).String(), mib(changed/n*perHour)+"/h",
			h(r.ckptBytes-r.baseBytes), h(r.baseBytes), h(r.ingestBytes), h(r.workingBytes), h(r.smallBytes), h(files), h(r.diskBytes), h(r.diskBytes-files), h(r.uploadBytes),
			fmt.Sprintf("%.2f×", float64(r.ckptBytes+r.uploadBytes)/changed), fmt.Sprintf("%.2f×", float64(files)/changed), fmt.Sprintf("%.2f×", float64(r.diskBytes)/changed),
			fmt.Sprintf("%.2f×", float64(r.uploadBytes)/changed), mib(float64(r.chainMaxRead)),
			fmt.Sprintf("%.1f%%", 100*r.cpu.Seconds()/r.elapsed.Seconds()), mib(float64(r.peakRSS)))
	}
	cacheNote := "default"
	if *cache != "" {
		cacheNote = *cache
	}
	fmt.Printf("\n(f) SD-card wear and uplink at %d keys, %.1f%% of them changed per checkpoint, state cache %s, per hour at a checkpoint every %v (run at one every %v); whole cycles from a new base to the next; all files = the bytes written to data_dir's files; write_bytes from /proc/PID/io; %d CPUs, %s\n\n",
		*keys, 100**change, cacheNote, *hourInterval, *interval, runtime.NumCPU(), runtime.Version())
	t.write(os.Stdout)
	return nil
}
