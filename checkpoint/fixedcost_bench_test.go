//go:build unix

package checkpoint

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/state/vfs"
)

// BenchmarkCheckpoint_FixedCost2000Keys measures what one checkpoint costs
// the agent at a small state, the footprint workload's: 1,000 devices with
// two open windows each (2,000 live keys of ~40 bytes), every device's
// current window changed between checkpoints, and every tenth checkpoint
// the windows roll over (1,000 deleted, 1,000 new). Each op is one
// checkpoint as the agent drives it: the coordinator's trigger, the bbolt
// snapshot at the barrier, the snapshot file written and fsynced, the
// manifest, retention of 3, and the chain upkeep the coordinator asks for
// (a background merge or a full checkpoint), run inline. cpu-µs/op is the
// process's user+system CPU per checkpoint (getrusage), the figure that
// adds to the agent's CPU at 1 s checkpoints; ns/op includes waiting for
// fsync.
//
//	go test -run '^$' -bench FixedCost2000Keys -benchtime 300x ./checkpoint/
func BenchmarkCheckpoint_FixedCost2000Keys(b *testing.B) {
	dir := b.TempDir()
	be, err := state.OpenBolt(filepath.Join(dir, "state.db"), state.BoltOptions{MaxSize: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	bk, err := be.Bucket("window/fp/acc", state.KeyGroupPrefix)
	if err != nil {
		b.Fatal(err)
	}
	store, err := OpenStore(vfs.Default, filepath.Join(dir, "checkpoints"))
	if err != nil {
		b.Fatal(err)
	}
	const devices = 1000
	key := func(dst []byte, dev int, window uint64) []byte {
		dst = binary.BigEndian.AppendUint16(dst[:0], uint16(dev%128))
		dst = fmt.Appendf(dst, "\x0esensor-%07d", dev)
		return binary.BigEndian.AppendUint64(dst, window)
	}
	val := make([]byte, 40) // count, sum, max and the window's bounds
	var k []byte
	window := uint64(1)
	step := 0
	// change advances the state by one checkpoint interval.
	change := func() {
		step++
		if step%10 == 0 {
			for d := range devices {
				if err := be.Delete(bk, key(k, d, window-1)); err != nil {
					b.Fatal(err)
				}
			}
			window++
		}
		for d := range devices {
			k = key(k, d, window)
			binary.BigEndian.PutUint64(val, uint64(step))
			if err := be.Put(bk, k, val); err != nil {
				b.Fatal(err)
			}
		}
	}
	for d := range devices { // the previous window, still open
		if err := be.Put(bk, key(k, d, window-1), val); err != nil {
			b.Fatal(err)
		}
	}
	change()

	cfg := DefaultConfig("window/0")
	cfg.Interval, cfg.MergeChains, cfg.MinMergeBase = time.Second, true, DefaultMinMergeBase // as the agent
	coord, err := NewCoordinator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var nowMs int64
	coord.Tick(nowMs) // starts the clock: the first trigger is an interval later
	var lastSnap uint64
	var written int64 // snapshot and merged files' bytes
	// checkpoint takes one checkpoint through the coordinator, doing the
	// agent's part of each Ready inline.
	checkpoint := func() {
		nowMs += cfg.Interval.Milliseconds()
		coord.Tick(nowMs)
		completed := false
		for !completed {
			if !coord.HasReady() {
				b.Fatal("coordinator has nothing to do")
			}
			rd := coord.Ready()
			for _, tr := range rd.Triggers {
				full := tr.Kind != KindIncremental || tr.Parent != lastSnap
				snap, err := be.Snapshot(full)
				if err != nil {
					b.Fatal(err)
				}
				lastSnap = tr.ID
				kind := KindFull
				if snap.Incremental() {
					kind = KindIncremental
				}
				ref, err := store.WriteSnapshot("window/0", "fp", kind, tr.ID, snap.Entries)
				snap.Close()
				if err != nil {
					b.Fatal(err)
				}
				written += ref.Size
				if err := coord.Step(Ack{CheckpointID: tr.ID, Task: "window/0", Files: []FileRef{ref}}); err != nil {
					b.Fatal(err)
				}
			}
			if m := rd.Manifest; m != nil {
				m.Time = time.Unix(nowMs/1000, 0).UTC()
				if err := store.WriteManifest(m); err != nil {
					b.Fatal(err)
				}
			}
			if len(rd.Completed) > 0 {
				completed = true
				if _, err := store.Retain(3); err != nil {
					b.Fatal(err)
				}
			}
			if len(rd.Aborted) > 0 {
				b.Fatalf("checkpoint aborted: %v", rd.Aborted[0].Reason)
			}
			if cp := rd.Compaction; cp != nil {
				res := Compacted{Through: cp.Through, Files: map[string]FileRef{}}
				for task, chain := range cp.Chains {
					ref, err := store.MergeChain(context.Background(), chain, cp.Through)
					if err != nil {
						b.Fatal(err)
					}
					res.Files[task] = ref
					written += ref.Size
				}
				if err := coord.Step(res); err != nil {
					b.Fatal(err)
				}
			}
			coord.Advance()
		}
	}
	for range 20 { // past the first full checkpoint and a roll-over
		change()
		checkpoint()
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var inCheckpoints time.Duration
	written = 0
	for b.Loop() {
		b.StopTimer()
		change()
		b.StartTimer()
		c0 := cpu()
		checkpoint()
		inCheckpoints += cpu() - c0
	}
	b.ReportMetric(float64(inCheckpoints.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(written)/float64(b.N), "file-B/op")
}
