package checkpoint

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/state/vfs"
)

// BenchmarkCheckpoint_OnePercentOfMillion measures the acceptance figure
// figure end to end: from the barrier (state.Backend.Snapshot on a bbolt
// store of 1M keys, the agent's default 32 MiB write-back cache, 1% of the
// keys changed at random since the previous checkpoint) until the snapshot
// file is written and fsynced and the manifest is durable. The barrier-ms
// metric is the part that stalls processing (Snapshot's return); the rest
// runs beside processing in the agent. Target: end to end ≤ 50 ms, file ≤ 2×
// the changed entries' bytes.
//
//	go test -run '^$' -bench OnePercentOfMillion -benchtime 20x ./checkpoint/
func BenchmarkCheckpoint_OnePercentOfMillion(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 1M-key store")
	}
	dir := b.TempDir()
	be, err := state.OpenBolt(filepath.Join(dir, "state.db"), state.BoltOptions{MaxSize: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	const bucket = "window/temp_1m/acc"
	bk, err := be.Bucket(bucket, state.KeyGroupPrefix)
	if err != nil {
		b.Fatal(err)
	}
	const n = 1_000_000
	key := func(dst []byte, i int) []byte {
		dst = binary.BigEndian.AppendUint16(dst[:0], uint16(i%128))
		return fmt.Appendf(dst, "\x0esensor-%07d\x01w", i)
	}
	val := make([]byte, 40) // about a window's 4 aggregates
	var k []byte
	if err := be.Restore(func(fn func(b, k, v []byte, del bool) error) error {
		for kg := range 128 { // in key order, as a checkpoint is
			for i := kg; i < n; i += 128 {
				k = key(k, i)
				if err := fn([]byte(bucket), k, val, false); err != nil {
					return err
				}
			}
		}
		return nil
	}, state.RestoreOptions{}); err != nil {
		b.Fatal(err)
	}
	store, err := OpenStore(vfs.Default, filepath.Join(dir, "checkpoints"))
	if err != nil {
		b.Fatal(err)
	}
	checkpoint := func(id uint64, full bool) (barrier, total time.Duration, ref FileRef) {
		t0 := time.Now()
		snap, err := be.Snapshot(full)
		if err != nil {
			b.Fatal(err)
		}
		barrier = time.Since(t0)
		kind := KindFull
		if snap.Incremental() {
			kind = KindIncremental
		}
		ref, err = store.WriteSnapshot("window/0", "temp_1m", kind, id, snap.Entries)
		if err != nil {
			b.Fatal(err)
		}
		if err := snap.Close(); err != nil {
			b.Fatal(err)
		}
		m := &Manifest{FormatVersion: ManifestVersion, ID: id, Time: time.Unix(int64(id), 0).UTC(), Kind: kind, Files: []FileRef{ref}}
		if err := store.WriteManifest(m); err != nil {
			b.Fatal(err)
		}
		return barrier, time.Since(t0), ref
	}
	checkpoint(1, true) // the base
	r := rand.New(rand.NewPCG(5, 6))
	id := uint64(1)
	var barriers, totals []time.Duration
	var changedBytes, fileBytes int64
	for b.Loop() {
		b.StopTimer()
		changed := map[int]bool{}
		for len(changed) < n/100 {
			i := r.IntN(n)
			changed[i] = true
			k = key(k, i)
			val[0]++
			if err := be.Put(bk, k, val); err != nil {
				b.Fatal(err)
			}
		}
		changedBytes = int64(len(changed) * (len(bucket) + len(k) + len(val)))
		b.StartTimer()
		id++
		barrier, total, ref := checkpoint(id, false)
		if ref.Kind != KindIncremental {
			b.Fatalf("checkpoint %d is %s, want incremental", id, ref.Kind)
		}
		barriers, totals = append(barriers, barrier), append(totals, total)
		fileBytes = ref.Size
	}
	slices.Sort(barriers)
	slices.Sort(totals)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(barriers[len(barriers)/2]), "barrier-p50-ms")
	b.ReportMetric(ms(barriers[len(barriers)-1]), "barrier-max-ms")
	b.ReportMetric(ms(totals[len(totals)/2]), "durable-p50-ms")
	b.ReportMetric(ms(totals[len(totals)-1]), "durable-max-ms")
	b.ReportMetric(float64(fileBytes)/float64(changedBytes), "file/changed")
}
