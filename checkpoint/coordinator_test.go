package checkpoint

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// Coordinator tests use no disk, no clock and no goroutine: time moves by
// Tick, messages arrive by Step, and each Ready is carried out at once.

type harness struct {
	t    *testing.T
	c    *Coordinator
	trig []Trigger // triggers of Readys taken since the last tick
	// compaction is the last Compaction handed out.
	compaction *Compaction
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	c, err := NewCoordinator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, c: c}
}

// ready takes the Ready, "writes" its manifest, and advances.
func (h *harness) ready() Ready {
	h.t.Helper()
	if !h.c.HasReady() {
		return Ready{}
	}
	rd := h.c.Ready()
	if rd.Manifest != nil {
		rd.Manifest.Time = time.UnixMilli(1_700_000_000_000).UTC()
	}
	h.c.Advance()
	h.trig = append(h.trig, rd.Triggers...)
	if rd.Compaction != nil {
		h.compaction = rd.Compaction
	}
	return rd
}

func (h *harness) step(m Message) {
	h.t.Helper()
	if err := h.c.Step(m); err != nil {
		h.t.Fatalf("Step(%+v): %v", m, err)
	}
}

// tick moves time and returns the ids and kinds triggered.
func (h *harness) tick(ms int64) []Trigger {
	h.t.Helper()
	h.trig = nil
	h.c.Tick(ms)
	h.ready()
	trig := h.trig
	h.trig = nil
	return trig
}

// file makes the FileRef a task would get from Store.WriteSnapshot.
func file(task string, id uint64, kind Kind) FileRef {
	sum := fmt.Sprintf("%064x", id*1000+uint64(len(task))*7+uint64(task[len(task)-1]))
	return FileRef{Name: "files/" + sum + ".snap", SHA256: sum, Size: 100, Kind: kind, Checkpoint: id, Task: task, Pipeline: "p"}
}

// ackAll acknowledges checkpoint id from every task with one file of kind
// and returns the Ready that follows (holding the manifest).
func (h *harness) ackAll(id uint64, kind Kind) Ready {
	h.t.Helper()
	for _, task := range h.c.cfg.Tasks {
		h.step(Ack{CheckpointID: id, Task: task, Files: []FileRef{file(task, id, kind)}})
	}
	return h.ready()
}

func wantTrigger(t *testing.T, got []Trigger, want ...Trigger) {
	t.Helper()
	for i := range want {
		want[i].Mode = ExactlyOnce
	}
	if !slices.Equal(got, want) {
		t.Fatalf("triggers %+v, want %+v", got, want)
	}
}

func testConfig(tasks ...string) Config {
	cfg := DefaultConfig(tasks...)
	cfg.Interval, cfg.Timeout = 10*time.Second, 30*time.Second
	return cfg
}

// docs/architecture.md "Checkpoints" 1 and 4: checkpoint n completes only when every
// task acknowledged and the manifest is durable; then sinks are notified.
func TestCoordinator_AcksFromSeveralTasks(t *testing.T) {
	h := newHarness(t, testConfig("source", "window/0", "window/1"))
	wantTrigger(t, h.tick(0))
	wantTrigger(t, h.tick(9_999))
	wantTrigger(t, h.tick(10_000), Trigger{ID: 1, Kind: KindFull})

	h.step(Ack{CheckpointID: 1, Task: "source", Positions: map[string]uint64{"sensors": 4096}})
	h.step(Ack{CheckpointID: 1, Task: "window/0", Files: []FileRef{file("window/0", 1, KindFull)}, AlignmentMs: 3})
	h.c.Tick(11_000)
	if rd := h.ready(); rd.Manifest != nil || len(rd.Completed) != 0 {
		t.Fatalf("manifest before every task acked: %+v", rd)
	}
	h.step(Ack{CheckpointID: 1, Task: "window/0"}) // a repeat is ignored
	h.c.Tick(12_500)
	h.step(Ack{CheckpointID: 1, Task: "window/1", Files: []FileRef{file("window/1", 1, KindFull)}, AlignmentMs: 7})
	rd := h.ready()
	m := rd.Manifest
	if m == nil || len(rd.Completed) != 0 {
		t.Fatalf("Ready after the last ack = %+v, want a manifest and no completion yet", rd)
	}
	if m.ID != 1 || m.Kind != KindFull || m.DurationMs != 2_500 || m.AlignmentMs != 7 || m.SourcePositions["sensors"] != 4096 || len(m.Files) != 2 {
		t.Errorf("manifest %+v", m)
	}
	if err := m.Validate(); err != nil {
		t.Error(err)
	}
	rd = h.ready()
	if len(rd.Completed) != 1 || rd.Completed[0].ID != 1 || rd.Completed[0].Manifest != m {
		t.Fatalf("Ready after Advance = %+v, want checkpoint 1 completed", rd)
	}
	st := h.c.Stats()
	if st.Completed != 1 || st.LastCompletedID != 1 || st.LastDurationMs != 2_500 || st.LastSize != 200 || st.InProgress != 0 {
		t.Errorf("stats %+v", st)
	}
	wantTrigger(t, h.tick(20_000), Trigger{ID: 2, Kind: KindIncremental, Parent: 1})
}

func TestCoordinator_Timeout(t *testing.T) {
	h := newHarness(t, testConfig("a", "b"))
	h.tick(0)
	wantTrigger(t, h.tick(10_000), Trigger{ID: 1, Kind: KindFull})
	h.step(Ack{CheckpointID: 1, Task: "a"})
	h.c.Tick(39_999)
	if rd := h.ready(); len(rd.Aborted) != 0 {
		t.Fatalf("aborted before the timeout: %+v", rd)
	}
	h.c.Tick(40_000)
	rd := h.ready()
	if len(rd.Aborted) != 1 || rd.Aborted[0].ID != 1 || !errors.Is(rd.Aborted[0].Reason, ErrTimeout) {
		t.Fatalf("Ready = %+v, want checkpoint 1 aborted by timeout", rd)
	}
	// The interval has passed and min_pause is 0: the next one starts in
	// the same Tick. The aborted checkpoint left no chain: it is full again.
	wantTrigger(t, rd.Triggers, Trigger{ID: 2, Kind: KindFull})
	// A late ack for the aborted checkpoint is stale, not an error.
	h.step(Ack{CheckpointID: 1, Task: "b"})
	if st := h.c.Stats(); st.StaleMessages != 1 || st.ConsecutiveFailures != 1 || st.Aborted != 1 {
		t.Errorf("stats %+v", st)
	}
	if h.c.HasReady() {
		t.Error("a stale ack produced work")
	}
}

func TestCoordinator_TolerableFailures(t *testing.T) {
	tests := []struct {
		name      string
		tolerable int
		outcomes  string // per checkpoint: t = timeout, d = decline, f = failure, c = complete
		failedAt  int    // index of the checkpoint after which Failed() != nil, -1 for never
	}{
		{"default 3 tolerates three", 3, "tttc", -1},
		{"fourth failure fails", 3, "tdft", 3},
		{"success resets the count", 3, "tttcttt", -1},
		{"zero fails at once", 0, "f", 0},
		{"one", 1, "cdcdt", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig("a")
			cfg.TolerableFailures = tt.tolerable
			h := newHarness(t, cfg)
			now := int64(0)
			h.tick(now)
			var next []Trigger
			for i, o := range tt.outcomes {
				trig := next
				next = nil
				for len(trig) == 0 && h.c.Failed() == nil {
					now += 10_000
					trig = h.tick(now)
				}
				if len(trig) != 1 {
					t.Fatalf("checkpoint %d: triggers %+v", i, trig)
				}
				id := trig[0].ID
				switch o {
				case 't':
					now += 30_000
					next = h.tick(now)
				case 'd':
					h.step(Decline{CheckpointID: id, Task: "a", Reason: "restoring"})
				case 'f':
					h.step(Failure{CheckpointID: id, Task: "a", Err: errors.New("no space left on device")})
				case 'c':
					h.ackAll(id, trig[0].Kind)
				}
				h.ready()
				if failed := h.c.Failed() != nil; failed != (tt.failedAt >= 0 && i >= tt.failedAt) {
					t.Fatalf("after checkpoint %d (%c): Failed() = %v", i, o, h.c.Failed())
				}
			}
			if tt.failedAt >= 0 {
				if err := h.c.Failed(); !errors.Is(err, ErrTooManyFailures) {
					t.Errorf("Failed() = %v", err)
				}
				if trig := h.tick(now + time.Hour.Milliseconds()); len(trig) != 0 {
					t.Errorf("triggered %+v after failing", trig)
				}
			}
		})
	}
}

func TestCoordinator_MinPause(t *testing.T) {
	tests := []struct {
		name       string
		minPauseMs int64
		endMs      int64 // checkpoint 1 (triggered at 10s) ends here
		abort      bool
		nextMs     int64 // checkpoint 2 is triggered here
	}{
		{"no pause: interval from trigger", 0, 15_000, false, 20_000},
		{"pause shorter than the rest of the interval", 4_000, 15_000, false, 20_000},
		{"pause from completion", 8_000, 15_000, false, 23_000},
		{"pause after an abort too", 8_000, 17_000, true, 25_000},
		{"slow checkpoint: next waits for the pause", 2_000, 26_000, false, 28_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig("a")
			cfg.MinPause = time.Duration(tt.minPauseMs) * time.Millisecond
			h := newHarness(t, cfg)
			h.tick(0)
			h.tick(10_000)
			h.c.Tick(tt.endMs)
			if tt.abort {
				h.step(Decline{CheckpointID: 1, Task: "a"})
			} else {
				h.ackAll(1, KindFull)
			}
			h.ready()
			if trig := h.tick(tt.nextMs - 1); len(trig) != 0 {
				t.Fatalf("triggered at %d: %+v", tt.nextMs-1, trig)
			}
			if trig := h.tick(tt.nextMs); len(trig) != 1 || trig[0].ID != 2 {
				t.Fatalf("at %d: triggers %+v, want checkpoint 2", tt.nextMs, trig)
			}
		})
	}
}

// Config.MaxConcurrent is 1: no trigger while a checkpoint is in progress,
// however long the interval has passed, until it ends.
func TestCoordinator_OneAtATime(t *testing.T) {
	h := newHarness(t, testConfig("a"))
	h.tick(0)
	h.tick(10_000)
	for _, ms := range []int64{20_000, 30_000, 39_000} {
		if trig := h.tick(ms); len(trig) != 0 {
			t.Fatalf("triggered %+v at %d while checkpoint 1 is in progress", trig, ms)
		}
	}
	if st := h.c.Stats(); st.InProgress != 1 {
		t.Errorf("InProgress = %d", st.InProgress)
	}
	h.step(Ack{CheckpointID: 1, Task: "a", Files: []FileRef{file("a", 1, KindFull)}})
	rd := h.c.Ready()
	// The manifest is being written: still in progress, and not timed out.
	h.c.Tick(41_000)
	h.c.Advance()
	if rd.Manifest == nil || len(h.c.Ready().Triggers) != 0 {
		t.Fatalf("triggered while the manifest was written")
	}
	h.c.Advance()
	wantTrigger(t, h.tick(41_001), Trigger{ID: 2, Kind: KindIncremental, Parent: 1})
	if cfg := testConfig("a"); true {
		cfg.MaxConcurrent = 2
		if _, err := NewCoordinator(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("MaxConcurrent 2: err = %v", err)
		}
	}
}

// The manifest's Ready is handed out, its write fails: the agent steps a
// Failure before Advance and the checkpoint aborts instead of completing.
func TestCoordinator_ManifestWriteFails(t *testing.T) {
	h := newHarness(t, testConfig("a"))
	h.tick(0)
	h.tick(10_000)
	h.step(Ack{CheckpointID: 1, Task: "a", Files: []FileRef{file("a", 1, KindFull)}})
	rd := h.c.Ready()
	if rd.Manifest == nil {
		t.Fatal("no manifest")
	}
	h.step(Failure{CheckpointID: 1, Err: errors.New("fsync: input/output error")})
	h.c.Advance()
	rd = h.ready()
	if len(rd.Completed) != 0 || len(rd.Aborted) != 1 || !errors.Is(rd.Aborted[0].Reason, ErrFailed) {
		t.Fatalf("Ready = %+v, want checkpoint 1 aborted", rd)
	}
	wantTrigger(t, h.tick(20_000), Trigger{ID: 2, Kind: KindFull})
}

func TestCoordinator_Savepoint(t *testing.T) {
	h := newHarness(t, testConfig("a", "b"))
	h.tick(0)
	h.tick(10_000)
	h.ackAll(1, KindFull)
	h.ready()
	wantTrigger(t, h.tick(20_000), Trigger{ID: 2, Kind: KindIncremental, Parent: 1})

	// Requested while 2 is in progress: queued.
	h.step(TriggerSavepoint{Request: 77})
	if rd := h.ready(); len(rd.Triggers) != 0 {
		t.Fatalf("savepoint triggered during checkpoint 2: %+v", rd)
	}
	h.ackAll(2, KindIncremental)
	// Triggered as 2 completes: neither the interval nor min_pause holds a
	// savepoint, nor does it wait for a Tick.
	wantTrigger(t, h.ready().Triggers, Trigger{ID: 3, Kind: KindSavepoint, SavepointRequest: 77})
	// A savepoint is self-contained: an incremental file breaks the protocol.
	if err := h.c.Step(Ack{CheckpointID: 3, Task: "a", Files: []FileRef{file("a", 3, KindIncremental)}}); !errors.Is(err, ErrBadAck) {
		t.Fatalf("incremental file in a savepoint: err = %v", err)
	}
	rd := h.ready()
	if len(rd.Aborted) != 1 || rd.Aborted[0].SavepointRequest != 77 {
		t.Fatalf("Ready = %+v, want the savepoint aborted", rd)
	}
	if st := h.c.Stats(); st.ConsecutiveFailures != 0 {
		t.Errorf("a failed savepoint counted as a checkpoint failure: %+v", st)
	}

	// Requested when idle: triggered at once, without a Tick.
	h.step(TriggerSavepoint{Request: 78})
	rd = h.ready()
	wantTrigger(t, rd.Triggers, Trigger{ID: 4, Kind: KindSavepoint, SavepointRequest: 78})
	rd = h.ackAll(4, KindFull)
	if m := rd.Manifest; m == nil || m.Kind != KindSavepoint || len(m.Files) != 2 || m.Validate() != nil {
		t.Fatalf("savepoint manifest %+v", rd.Manifest)
	}
	rd = h.ready()
	if len(rd.Completed) != 1 || rd.Completed[0].SavepointRequest != 78 || rd.Completed[0].Kind != KindSavepoint {
		t.Fatalf("Ready = %+v", rd)
	}
	// The next checkpoint builds on checkpoint 2, not on the savepoint.
	wantTrigger(t, h.tick(31_000), Trigger{ID: 5, Kind: KindIncremental, Parent: 2})
}

// Each manifest lists the whole chain per task, base first; a task may
// answer an incremental trigger with a full file, restarting its chain; a
// new full checkpoint comes once the increments outweigh the bases
// (max_chain_ratio 1: every file is 100 bytes, so after 200 bytes of bases
// and 400 of increments).
func TestCoordinator_IncrementalChain(t *testing.T) {
	h := newHarness(t, testConfig("a", "b"))
	h.tick(0)
	var kinds []Kind
	var manifests []*Manifest
	for i := range 5 {
		now := int64(10_000 * (i + 1))
		trig := h.tick(now)
		if len(trig) != 1 {
			t.Fatalf("at %d: %+v", now, trig)
		}
		id, kind := trig[0].ID, trig[0].Kind
		kinds = append(kinds, kind)
		h.step(Ack{CheckpointID: id, Task: "a", Files: []FileRef{file("a", id, kind)}})
		bFiles := []FileRef{file("b", id, kind)}
		if id == 3 {
			bFiles[0].Kind = KindFull // b's deltas outgrew its base
		}
		h.step(Ack{CheckpointID: id, Task: "b", Files: bFiles})
		manifests = append(manifests, h.ready().Manifest)
		h.ready()
	}
	if want := []Kind{KindFull, KindIncremental, KindIncremental, KindIncremental, KindFull}; !slices.Equal(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
	chain := func(m *Manifest) string {
		var s []string
		for _, f := range m.Files {
			s = append(s, fmt.Sprintf("%s%d%c", f.Task, f.Checkpoint, f.Kind.String()[0]))
		}
		return strings.Join(s, " ")
	}
	want := []string{"a1f b1f", "a1f a2i b1f b2i", "a1f a2i a3i b3f", "a1f a2i a3i a4i b3f b4i", "a5f b5f"}
	for i, m := range manifests {
		if got := chain(m); got != want[i] {
			t.Errorf("manifest %d chain %q, want %q", m.ID, got, want[i])
		}
		if err := m.Validate(); err != nil {
			t.Error(err)
		}
	}
	if got := manifests[2].Size(); got != 200 {
		t.Errorf("Size() = %d, want the 2 files of checkpoint 3", got)
	}
}

// A new base comes when the chain's increments add up to more than
// max_chain_ratio × the bases, whatever their number; full_every, when set,
// caps the number of increments too.
func TestCoordinator_CompactionBySize(t *testing.T) {
	tests := []struct {
		name      string
		ratio     float64
		fullEvery int
		sizes     []int64 // bytes of each checkpoint's file; the first is the base
		want      string  // kinds triggered, F or I, one more than sizes
	}{
		{"small increments keep extending", 1, 0, []int64{1000, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10}, "FIIIIIIIIIIII"},
		{"a new base once increments pass the base", 1, 0, []int64{1000, 400, 400, 201, 1000, 10}, "FIIIFII"},
		{"equal to the bound still extends", 1, 0, []int64{1000, 500, 500, 1}, "FIIIF"},
		{"ratio 0.5", 0.5, 0, []int64{1000, 300, 300, 1000, 10}, "FIIFII"},
		{"ratio 0 makes every checkpoint full", 0, 0, []int64{1000, 1000, 1000}, "FFFF"},
		{"full_every caps the count", 1, 3, []int64{1000, 10, 10, 1000, 10, 10}, "FIIFIIF"},
		{"an empty base extends while nothing is written", 1, 0, []int64{0, 0, 0, 1}, "FIIIF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig("a")
			cfg.MaxChainRatio, cfg.FullEvery = tt.ratio, tt.fullEvery
			h := newHarness(t, cfg)
			h.tick(0)
			var got strings.Builder
			for i := range len(tt.sizes) + 1 {
				trig := h.tick(int64(10_000 * (i + 1)))
				if len(trig) != 1 {
					t.Fatalf("checkpoint %d: triggers %+v", i+1, trig)
				}
				got.WriteByte(strings.ToUpper(trig[0].Kind.String())[0])
				if i == len(tt.sizes) {
					break
				}
				f := file("a", trig[0].ID, trig[0].Kind)
				f.Size = tt.sizes[i]
				h.step(Ack{CheckpointID: trig[0].ID, Task: "a", Files: []FileRef{f}})
				h.ready()
				h.ready()
			}
			if got.String() != tt.want {
				t.Errorf("kinds %s, want %s", got.String(), tt.want)
			}
		})
	}
}

// chainOf describes a manifest's files as "a1f a2i …" (task, checkpoint,
// kind).
func chainOf(m *Manifest) string {
	var s []string
	for _, f := range m.Files {
		s = append(s, fmt.Sprintf("%s%d%c", f.Task, f.Checkpoint, f.Kind.String()[0]))
	}
	return strings.Join(s, " ")
}

// With MergeChains, a chain that outgrows max_chain_ratio is not answered
// by a full checkpoint: the agent is asked to merge it in the background
// while checkpoints go on incremental, and the merged base takes the
// chain's place in the manifests that complete after the answer, even one
// whose manifest was already out. A failed merge makes the next checkpoint
// full; an answer to no pending request is ignored.
func TestCoordinator_MergeChains(t *testing.T) {
	cfg := testConfig("a", "b")
	cfg.MergeChains = true
	h := newHarness(t, cfg)
	h.tick(0)
	now := int64(0)
	// checkpoint takes the next checkpoint with a file of size bytes for
	// task a (b is stateless), runs step, if any, after the acks and before
	// the manifest is written, and returns its kind and manifest.
	checkpoint := func(size int64, step *Compacted) (Kind, *Manifest) {
		t.Helper()
		now += 10_000
		trig := h.tick(now)
		if len(trig) != 1 {
			t.Fatalf("at %d: triggers %+v", now, trig)
		}
		f := file("a", trig[0].ID, trig[0].Kind)
		f.Size = size
		h.step(Ack{CheckpointID: trig[0].ID, Task: "a", Files: []FileRef{f}})
		h.step(Ack{CheckpointID: trig[0].ID, Task: "b"})
		rd := h.c.Ready()
		if step != nil {
			h.step(*step)
		}
		rd.Manifest.Time = time.UnixMilli(1).UTC()
		h.c.Advance()
		h.ready()
		if err := rd.Manifest.Validate(); err != nil {
			t.Fatal(err)
		}
		return trig[0].Kind, rd.Manifest
	}
	checkpoint(10000, nil)
	checkpoint(6000, nil)
	checkpoint(5000, nil) // the chain now outweighs its base
	if h.compaction != nil {
		t.Fatalf("compaction requested before a trigger: %+v", h.compaction)
	}
	kind, m := checkpoint(100, nil)
	cp := h.compaction
	if kind != KindIncremental || cp == nil || cp.Through != 3 || len(cp.Chains) != 1 || len(cp.Chains["a"]) != 3 {
		t.Fatalf("checkpoint 4: %v, compaction %+v; want incremental and a merge of a's chain of 3", kind, cp)
	}
	if got := chainOf(m); got != "a1f a2i a3i a4i" {
		t.Errorf("manifest 4 chain %q", got)
	}
	merged := file("a", 3, KindFull)
	merged.SHA256 = strings.Repeat("e", 64)
	merged.Name = "files/" + merged.SHA256 + ".snap"
	merged.Size = 11000
	h.compaction = nil
	// The answer comes while checkpoint 5's manifest is being written: 5
	// keeps the old chain, 6 lists the merged base.
	_, m = checkpoint(100, &Compacted{Through: 3, Files: map[string]FileRef{"a": merged}})
	if got := chainOf(m); got != "a1f a2i a3i a4i a5i" {
		t.Errorf("manifest 5 chain %q", got)
	}
	kind, m = checkpoint(100, nil)
	if got := chainOf(m); kind != KindIncremental || got != "a3f a4i a5i a6i" || m.Files[0] != merged {
		t.Errorf("checkpoint 6: %v, chain %q; want the merged base first", kind, got)
	}
	if h.compaction != nil {
		t.Errorf("another compaction requested for a chain within its ratio: %+v", h.compaction)
	}
	if st := h.c.Stats(); st.Merged != 1 {
		t.Errorf("stats %+v", st)
	}
	h.step(Compacted{Through: 3, Files: map[string]FileRef{"a": merged}}) // stale: ignored
	// Outgrow the merged base, then fail the merge.
	checkpoint(12000, nil)
	checkpoint(100, nil)
	if h.compaction == nil || h.compaction.Through != 7 {
		t.Fatalf("compaction %+v, want one through 7", h.compaction)
	}
	h.step(Compacted{Through: 7, Err: fmt.Errorf("disk on fire")})
	if kind, m = checkpoint(100, nil); kind != KindFull || chainOf(m) != "a9f" {
		t.Errorf("after a failed merge: %v %q, want a full checkpoint", kind, chainOf(m))
	}
	if st := h.c.Stats(); st.MergeFailures != 1 {
		t.Errorf("stats %+v", st)
	}
	if kind, _ = checkpoint(100, nil); kind != KindIncremental {
		t.Errorf("after the full checkpoint: %v, want incremental again", kind)
	}
}

// With MinMergeBase, a chain whose base is smaller and whose increments
// add up to the base or more is replaced by a full checkpoint, not merged;
// a chain of a larger base, or of increments smaller than their base (a
// max_chain_ratio below 1), is still merged.
func TestCoordinator_MinMergeBase(t *testing.T) {
	for _, tt := range []struct {
		name  string
		ratio float64
		sizes []int64 // of task a's file in checkpoints 1, 2, …
		want  string  // kinds of checkpoints 1 … len(sizes)+1
		merge bool    // a merge was requested
	}{
		{"small base, increments outweigh it: full", 1, []int64{1000, 600, 500}, "FIIF", false},
		{"small base, one increment outweighs it: full", 1, []int64{1000, 1200}, "FIF", false},
		{"base at the threshold: merged", 1, []int64{4096, 2500, 2000}, "FIII", true},
		{"small base, increments below it (ratio 0.1): merged", 0.1, []int64{1000, 60, 50}, "FIII", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig("a")
			cfg.MergeChains, cfg.MinMergeBase, cfg.MaxChainRatio = true, 4096, tt.ratio
			h := newHarness(t, cfg)
			h.tick(0)
			var got strings.Builder
			for i := 0; ; i++ {
				trig := h.tick(int64(10_000 * (i + 1)))
				if len(trig) != 1 {
					t.Fatalf("checkpoint %d: triggers %+v", i+1, trig)
				}
				got.WriteByte(strings.ToUpper(trig[0].Kind.String())[0])
				if i == len(tt.sizes) {
					break
				}
				f := file("a", trig[0].ID, trig[0].Kind)
				f.Size = tt.sizes[i]
				h.step(Ack{CheckpointID: trig[0].ID, Task: "a", Files: []FileRef{f}})
				h.ready()
				h.ready()
			}
			if got.String() != tt.want || (h.compaction != nil) != tt.merge {
				t.Errorf("kinds %s, merge requested %v; want %s, %v", got.String(), h.compaction != nil, tt.want, tt.merge)
			}
		})
	}
}

// While the disk is full, failed checkpoints do not count towards
// tolerable_failures and no periodic checkpoint is triggered; a savepoint
// still is; when space frees, checkpoints resume and count again.
func TestCoordinator_DiskFull(t *testing.T) {
	cfg := testConfig("a")
	cfg.TolerableFailures = 0
	h := newHarness(t, cfg)
	h.tick(0)
	wantTrigger(t, h.tick(10_000), Trigger{ID: 1, Kind: KindFull})
	h.c.DiskFull(true)
	h.step(Failure{CheckpointID: 1, Task: "a", Err: fmt.Errorf("write: no space left on device")})
	if rd := h.ready(); len(rd.Aborted) != 1 {
		t.Fatalf("Ready = %+v, want checkpoint 1 aborted", rd)
	}
	if err := h.c.Failed(); err != nil {
		t.Fatalf("a failure while the disk is full counted: %v", err)
	}
	wantTrigger(t, h.tick(20_000))
	wantTrigger(t, h.tick(100_000))
	h.step(TriggerSavepoint{Request: 7})
	wantTrigger(t, h.ready().Triggers, Trigger{ID: 2, Kind: KindSavepoint, SavepointRequest: 7})
	h.step(Failure{CheckpointID: 2, Task: "a", Err: fmt.Errorf("no space")})
	h.ready()
	h.c.Tick(110_000)
	h.c.DiskFull(false)
	wantTrigger(t, h.ready().Triggers, Trigger{ID: 3, Kind: KindFull})
	h.step(Failure{CheckpointID: 3, Task: "a", Err: fmt.Errorf("disk error")})
	h.ready()
	if err := h.c.Failed(); !errors.Is(err, ErrTooManyFailures) {
		t.Errorf("after the disk has room again a failure counts: Failed() = %v", err)
	}
	if st := h.c.Stats(); st.ConsecutiveFailures != 1 {
		t.Errorf("stats %+v, want 1 failure in a row", st)
	}
}

// Ids continue after a restore and the first checkpoint after it is full.
func TestCoordinator_RestoreContinuesIDs(t *testing.T) {
	h := newHarness(t, testConfig("a"))
	if err := h.c.Restore(41); err != nil {
		t.Fatal(err)
	}
	h.tick(0)
	wantTrigger(t, h.tick(10_000), Trigger{ID: 42, Kind: KindFull})
	if err := h.c.Restore(50); !errors.Is(err, ErrInProgress) {
		t.Errorf("Restore after a trigger: err = %v", err)
	}
	if err := h.c.Step(Ack{CheckpointID: 43, Task: "a"}); err == nil {
		t.Error("ack for a checkpoint never triggered accepted")
	}
	if err := h.c.Step(Ack{CheckpointID: 41, Task: "a"}); err != nil {
		t.Errorf("ack for a checkpoint of the previous run: %v, want ignored", err)
	}
}

func TestCoordinator_StepErrors(t *testing.T) {
	h := newHarness(t, testConfig("a", "b"))
	h.tick(0)
	h.tick(10_000)
	if err := h.c.Step(Ack{CheckpointID: 1, Task: "c"}); !errors.Is(err, ErrUnknownTask) {
		t.Errorf("unknown task: err = %v", err)
	}
	h.step(Ack{CheckpointID: 1, Task: "a", Positions: map[string]uint64{"s": 1}})
	err := h.c.Step(Ack{CheckpointID: 1, Task: "b", Positions: map[string]uint64{"s": 2}})
	if !errors.Is(err, ErrBadAck) {
		t.Errorf("position reported twice: err = %v", err)
	}
	if rd := h.ready(); len(rd.Aborted) != 1 || rd.Manifest != nil {
		t.Errorf("Ready = %+v, want the checkpoint aborted", rd)
	}
	wantTrigger(t, h.tick(20_000), Trigger{ID: 2, Kind: KindFull})
	if err := h.c.Step(Ack{CheckpointID: 2, Task: "a", Files: []FileRef{file("b", 2, KindFull)}}); !errors.Is(err, ErrBadAck) {
		t.Errorf("another task's file: err = %v", err)
	}
}

func TestCoordinator_ReadyWithoutAdvancePanics(t *testing.T) {
	h := newHarness(t, testConfig("a"))
	h.c.Ready()
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	h.c.Ready()
}

func TestNewCoordinator_InvalidConfig(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"zero interval", func(c *Config) { c.Interval = 0 }},
		{"zero timeout", func(c *Config) { c.Timeout = 0 }},
		{"negative pause", func(c *Config) { c.MinPause = -time.Second }},
		{"negative tolerable", func(c *Config) { c.TolerableFailures = -1 }},
		{"no mode", func(c *Config) { c.Mode = 0 }},
		{"negative full_every", func(c *Config) { c.FullEvery = -1 }},
		{"negative max_chain_ratio", func(c *Config) { c.MaxChainRatio = -0.5 }},
		{"NaN max_chain_ratio", func(c *Config) { c.MaxChainRatio = math.NaN() }},
		{"infinite max_chain_ratio", func(c *Config) { c.MaxChainRatio = math.Inf(1) }},
		{"no tasks", func(c *Config) { c.Tasks = nil }},
		{"repeated task", func(c *Config) { c.Tasks = []string{"a", "a"} }},
		{"empty task", func(c *Config) { c.Tasks = []string{""} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig("a")
			tt.edit(&cfg)
			if _, err := NewCoordinator(cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("err = %v", err)
			}
		})
	}
}

// TestCoordinator_SuspendAbortsWithoutFailingAndHolds: a restarting region
// suspends checkpoints; the one in progress is aborted without counting as a
// failure, nothing triggers until Resume, then checkpoints go on.
func TestCoordinator_SuspendAbortsWithoutFailingAndHolds(t *testing.T) {
	cfg := DefaultConfig("a", "b")
	cfg.Interval, cfg.TolerableFailures = time.Second, 0
	c, err := NewCoordinator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Tick(0)
	c.Tick(1000)
	rd := c.Ready()
	c.Advance()
	if len(rd.Triggers) != 1 {
		t.Fatalf("triggers %v", rd.Triggers)
	}
	c.Suspend(errors.New("region restarting"))
	rd = c.Ready()
	c.Advance()
	if len(rd.Aborted) != 1 || rd.Aborted[0].ID != 1 {
		t.Fatalf("aborted %v, want checkpoint 1", rd.Aborted)
	}
	if c.Failed() != nil || c.Stats().ConsecutiveFailures != 0 {
		t.Fatalf("a suspension counted as a failure: %v, %d", c.Failed(), c.Stats().ConsecutiveFailures)
	}
	c.Tick(5000)
	if c.HasReady() {
		t.Fatalf("triggered while suspended: %+v", c.Ready())
	}
	if err := c.Step(TriggerSavepoint{Request: 7}); err != nil {
		t.Fatal(err)
	}
	if c.HasReady() {
		t.Fatalf("a savepoint triggered while suspended: %+v", c.Ready())
	}
	c.Resume()
	rd = c.Ready()
	c.Advance()
	if len(rd.Triggers) != 1 || rd.Triggers[0].ID != 2 || rd.Triggers[0].SavepointRequest != 7 {
		t.Fatalf("after Resume: %+v, want the waiting savepoint as checkpoint 2", rd.Triggers)
	}
}

// A stall (an exactly-once sink waiting for its uplink) keeps the pending
// checkpoint alive past its timeout and triggers nothing new; when it ends,
// the pending checkpoint has a full timeout from then.
func TestCoordinator_StallHoldsTimeoutAndTriggers(t *testing.T) {
	cfg := DefaultConfig("a")
	cfg.Interval, cfg.Timeout, cfg.TolerableFailures = time.Second, 2*time.Second, 1
	c, err := NewCoordinator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Tick(0)
	c.Tick(1000)
	rd := c.Ready()
	c.Advance()
	if len(rd.Triggers) != 1 {
		t.Fatalf("triggers %v", rd.Triggers)
	}
	c.Stall(true)
	c.Tick(60_000) // far past the 2 s timeout
	if c.HasReady() {
		t.Fatalf("while stalled: %+v, want nothing (no timeout, no trigger)", c.Ready())
	}
	c.Stall(false)
	c.Tick(61_999)
	if c.HasReady() {
		t.Fatalf("timed out %d ms after the stall ended: %+v", 1999, c.Ready())
	}
	c.Tick(62_000)
	rd = c.Ready()
	c.Advance()
	if len(rd.Aborted) != 1 || !errors.Is(rd.Aborted[0].Reason, ErrTimeout) {
		t.Fatalf("a full timeout after the stall: %+v, want checkpoint 1 timed out", rd.Aborted)
	}
}

// Hurry triggers the next periodic checkpoint without waiting for the
// interval, but not while one is in progress, not before MinPause after
// the last ended, and not while stalled; one call asks for one checkpoint,
// and a savepoint does not answer it.
func TestCoordinator_Hurry(t *testing.T) {
	cfg := testConfig("a")
	cfg.MinPause = 2 * time.Second
	h := newHarness(t, cfg)
	h.tick(0)
	h.c.Hurry()
	wantTrigger(t, h.ready().Triggers, Trigger{ID: 1, Kind: KindFull})
	h.c.Hurry() // in progress: waits for it to end, then for the pause
	h.c.Tick(1_000)
	h.ackAll(1, KindFull)
	wantTrigger(t, h.tick(2_999))
	wantTrigger(t, h.tick(3_000), Trigger{ID: 2, Kind: KindIncremental, Parent: 1})
	h.c.Tick(3_500)
	h.ackAll(2, KindIncremental)
	// Answered: the next one waits for the interval again.
	wantTrigger(t, h.tick(12_999))
	wantTrigger(t, h.tick(13_000), Trigger{ID: 3, Kind: KindIncremental, Parent: 2})
	h.c.Tick(13_100)
	h.ackAll(3, KindIncremental)
	h.c.Stall(true)
	h.c.Tick(16_000)
	h.c.Hurry()
	wantTrigger(t, h.ready().Triggers)
	h.step(TriggerSavepoint{Request: 9})
	wantTrigger(t, h.ready().Triggers, Trigger{ID: 4, Kind: KindSavepoint, SavepointRequest: 9})
	h.c.Tick(16_100)
	h.ackAll(4, KindFull)
	wantTrigger(t, h.tick(18_100))
	h.c.Stall(false)
	wantTrigger(t, h.ready().Triggers, Trigger{ID: 5, Kind: KindFull}) // full: the increments outweigh the base
}

// A savepoint queued behind a checkpoint is triggered in the Ready that
// follows the end of that checkpoint, whether it completed or aborted,
// without another Tick: an agent on a quiet device stops ticking once
// nothing changes, and its savepoint waited for the next reading. The
// agent ticks before stepping the request, which starts an overdue
// periodic checkpoint first.
func TestCoordinator_SavepointAfterOverdueCheckpoint(t *testing.T) {
	cases := []struct {
		name string
		cfg  func(*Config)
		// end ends checkpoint 2, the overdue periodic one; it returns the
		// Ready that follows.
		end  func(h *harness) Ready
		want []Trigger
		// resume runs after end; the savepoint is then triggered in
		// the Ready that follows it, not before.
		resume func(h *harness)
	}{
		{
			name: "completed",
			end:  func(h *harness) Ready { h.ackAll(2, KindIncremental); return h.ready() },
			want: []Trigger{{ID: 3, Kind: KindSavepoint, SavepointRequest: 9}},
		},
		{
			name: "completed with min_pause",
			cfg:  func(c *Config) { c.MinPause = 5 * time.Second },
			end:  func(h *harness) Ready { h.ackAll(2, KindIncremental); return h.ready() },
			want: []Trigger{{ID: 3, Kind: KindSavepoint, SavepointRequest: 9}},
		},
		{
			name: "declined",
			end: func(h *harness) Ready {
				h.step(Decline{CheckpointID: 2, Task: "a", Reason: "busy"})
				return h.ready()
			},
			want: []Trigger{{ID: 3, Kind: KindSavepoint, SavepointRequest: 9}},
		},
		{
			name: "task failed",
			end: func(h *harness) Ready {
				h.step(Failure{CheckpointID: 2, Task: "b", Err: errors.New("write failed")})
				return h.ready()
			},
			want: []Trigger{{ID: 3, Kind: KindSavepoint, SavepointRequest: 9}},
		},
		{
			name: "manifest write failed",
			end: func(h *harness) Ready {
				for _, task := range h.c.cfg.Tasks {
					h.step(Ack{CheckpointID: 2, Task: task, Files: []FileRef{file(task, 2, KindIncremental)}})
				}
				if rd := h.c.Ready(); rd.Manifest == nil {
					h.t.Fatal("no manifest")
				}
				h.step(Failure{CheckpointID: 2, Err: errors.New("fsync: input/output error")})
				h.c.Advance()
				return h.ready()
			},
			want: []Trigger{{ID: 3, Kind: KindSavepoint, SavepointRequest: 9}},
		},
		{
			name: "disk full",
			end: func(h *harness) Ready {
				h.c.DiskFull(true)
				h.step(Failure{CheckpointID: 2, Task: "a", Err: errors.New("no space left on device")})
				return h.ready()
			},
			want: []Trigger{{ID: 3, Kind: KindSavepoint, SavepointRequest: 9}},
		},
		{
			name: "stalled",
			end: func(h *harness) Ready {
				h.c.Stall(true)
				h.ackAll(2, KindIncremental)
				return h.ready()
			},
			want: []Trigger{{ID: 3, Kind: KindSavepoint, SavepointRequest: 9}},
		},
		{
			name: "suspended: waits for Resume",
			end: func(h *harness) Ready {
				h.c.Suspend(errors.New("region restarts"))
				return h.ready()
			},
			want:   nil,
			resume: func(h *harness) { h.c.Resume() },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig("a", "b")
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			h := newHarness(t, cfg)
			h.tick(0)
			wantTrigger(t, h.tick(10_000), Trigger{ID: 1, Kind: KindFull})
			h.ackAll(1, KindFull)
			h.ready()
			// Quiet: no Tick for long past the interval. Then the request,
			// after the agent's Tick, which starts the overdue checkpoint.
			wantTrigger(t, h.tick(60_000), Trigger{ID: 2, Kind: KindIncremental, Parent: 1})
			h.step(TriggerSavepoint{Request: 9})
			if rd := h.ready(); len(rd.Triggers) != 0 {
				t.Fatalf("savepoint triggered while checkpoint 2 is in progress: %+v", rd.Triggers)
			}
			rd := tc.end(h)
			ended := len(rd.Completed) + len(rd.Aborted)
			if ended != 1 || (len(rd.Completed) == 1 && rd.Completed[0].ID != 2) || (len(rd.Aborted) == 1 && rd.Aborted[0].ID != 2) {
				t.Fatalf("Ready after the end of checkpoint 2 = %+v, want it completed or aborted", rd)
			}
			wantTrigger(t, rd.Triggers, tc.want...)
			if tc.resume != nil {
				tc.resume(h)
				wantTrigger(t, h.ready().Triggers, Trigger{ID: 3, Kind: KindSavepoint, SavepointRequest: 9})
			}
		})
	}
}
