package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/operators/io/ingest"
	"github.com/eddy-edge/eddy/operators/io/sink"
	"github.com/eddy-edge/eddy/operators/io/walsink/wal"
	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/state/vfs"
)

var (
	powerLossCycles = flag.Int("powerloss.cycles", 2000, "TestPowerLoss: append → ack → checkpoint → crash → recover cycles")
	powerLossSeed   = flag.Uint64("powerloss.seed", 1, "TestPowerLoss: seed of the random cycles")
)

// The durable files of one agent, as the agent lays them out in data_dir.
const (
	plIngestDir = "/data/ingest/src"
	plStoreDir  = "/data/checkpoints"
	plWALDir    = "/data/wal/out"
	plOutDir    = "/data/out"
	plRetain    = 2
)

// plWorld is what the outside world knows across power cuts: what was
// acknowledged, which checkpoints completed, what output was consumed.
type plWorld struct {
	rng *rand.Rand

	nextKey   uint64          // the next message's key (its payload)
	attempted map[uint64]bool // keys appended but not acknowledged
	// content[i] is the key at log offset i+1: every acknowledged entry,
	// and every unacknowledged one a recovery found (durable from then on).
	content []uint64
	prefix  []uint64 // prefix[i]: sum of content[:i]

	completed map[uint64]uint64 // checkpoint id → ingest position, for every WriteManifest that returned nil
	newest    uint64            // the newest completed checkpoint
	position  map[uint64]uint64 // checkpoint id → position, for every manifest written or attempted

	consumed uint64 // the 2PC sink's committed output read so far: the keys at offsets 1..consumed

	walFrames [][]byte // WAL frame payloads written since the last recovery's Rotate
	walSynced int      // how many of them a WAL Sync made durable
}

// plDevice is one run of the agent's durable components between power cuts.
type plDevice struct {
	fs    *vfs.CutFS
	log   *ingest.Log
	store *checkpoint.Store
	wal   *wal.Log
	out   *sink.TwoPhaseFile
	pos   uint64 // the pipeline's state: the last offset processed …
	sum   uint64 // … and the sum of the keys up to it
	epoch uint64 // the next checkpoint's id; the sinks' current epoch
}

// runPowerLoss runs cycles of append → ack → process → checkpoint → power
// cut → recover, and returns the first broken guarantee.
func runPowerLoss(seed uint64, cycles int, skip func(*vfs.CutOptions)) error {
	w := &plWorld{
		rng:       rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		nextKey:   1,
		attempted: map[uint64]bool{},
		prefix:    []uint64{0},
		completed: map[uint64]uint64{},
		position:  map[uint64]uint64{},
	}
	disk := vfs.NewCrashableMem()
	for cycle := range cycles {
		var d *plDevice
		for {
			opts := vfs.CutOptions{Rand: w.rng}
			if skip != nil {
				skip(&opts)
			}
			if w.rng.IntN(4) == 0 {
				opts.At = 1 + w.rng.IntN(12) // the power fails again while recovering
			}
			p := vfs.NewCutFS(disk, opts)
			var err error
			if d, err = w.recover(p); p.Image() != nil {
				disk = p.Image()
				continue
			}
			if err != nil {
				return fmt.Errorf("seed %d, cycle %d, after the power cut: %w", seed, cycle, err)
			}
			break
		}
		d.fs.Arm(1 + w.rng.IntN(80))
		if err := w.run(d); err != nil && d.fs.Image() == nil {
			return fmt.Errorf("seed %d, cycle %d: %w", seed, cycle, err)
		}
		d.fs.Cut()
		disk = d.fs.Image()
	}
	return nil
}

// run appends, processes and checkpoints until the power is cut or it has
// done a cycle's work. An error after the cut is the cut's.
func (w *plWorld) run(d *plDevice) error {
	for range 1 + w.rng.IntN(3) {
		for range 1 + w.rng.IntN(3) {
			if err := w.appendBatch(d); err != nil {
				return err
			}
			if err := w.process(d); err != nil {
				return err
			}
		}
		if w.rng.IntN(5) > 0 {
			if err := w.checkpoint(d); err != nil {
				return err
			}
		}
	}
	return nil
}

// appendBatch appends 1–4 messages and acknowledges them when Append
// returns nil.
func (w *plWorld) appendBatch(d *plDevice) error {
	batch := make([]ingest.Entry, 1+w.rng.IntN(4))
	keys := make([]uint64, len(batch))
	for i := range batch {
		keys[i] = w.nextKey
		w.attempted[w.nextKey] = true
		batch[i] = ingest.Entry{Arrival: 1, Payload: strconv.AppendUint(nil, w.nextKey, 10)}
		w.nextKey++
	}
	first, _, err := d.log.Append(batch)
	if err != nil {
		return err
	}
	if first != uint64(len(w.content))+1 {
		return fmt.Errorf("append got offset %d, want %d", first, len(w.content)+1)
	}
	for _, k := range keys {
		w.know(k)
	}
	return nil
}

// know records key k at the next log offset.
func (w *plWorld) know(k uint64) {
	delete(w.attempted, k)
	w.content = append(w.content, k)
	w.prefix = append(w.prefix, w.prefix[len(w.prefix)-1]+k)
}

// process reads what was appended since the last processed offset into the
// pipeline's state and writes one output line per message to both sinks.
func (w *plWorld) process(d *plDevice) error {
	var items []record.Item
	var frames []byte
	err := forEachKey(d.log, d.pos+1, func(off, k uint64) error {
		d.pos, d.sum = off, d.sum+k
		items = append(items, record.Item{Payload: strconv.AppendUint(nil, k, 10)})
		frames = w.appendWALFrame(frames, binary.AppendUvarint(binary.AppendUvarint([]byte{'D'}, d.epoch), k))
		return nil
	})
	if err != nil || len(items) == 0 {
		return err
	}
	if err := d.out.Write(d.epoch, items); err != nil {
		return err
	}
	return d.wal.Write(frames)
}

// forEachKey calls fn with the offset and key of every entry of l from
// offset from on.
func forEachKey(l *ingest.Log, from uint64, fn func(off, k uint64) error) error {
	r, err := l.Reader(from)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		k, err := strconv.ParseUint(string(e.Payload), 10, 64)
		if err != nil {
			return fmt.Errorf("log offset %d holds %q", e.Offset, e.Payload)
		}
		if err := fn(e.Offset, k); err != nil {
			return err
		}
	}
}

func (w *plWorld) appendWALFrame(dst, payload []byte) []byte {
	w.walFrames = append(w.walFrames, payload)
	return wal.AppendFrame(dst, payload)
}

// checkpoint takes checkpoint d.epoch as the agent does: the sinks
// pre-commit, the state is snapshotted, the manifest makes it complete,
// then the sinks commit, retention runs and the ingest log is truncated
// below the oldest retained checkpoint.
func (w *plWorld) checkpoint(d *plDevice) error {
	id := d.epoch
	if err := d.out.PreCommit(id); err != nil {
		return err
	}
	if err := d.wal.Write(w.appendWALFrame(nil, binary.AppendUvarint([]byte{'P'}, id))); err != nil {
		return err
	}
	if err := d.wal.Sync(); err != nil {
		return err
	}
	w.walSynced = len(w.walFrames)
	ref, err := d.store.WriteSnapshot("task", "p", checkpoint.KindFull, id, func(fn func(bucket, key, value []byte, deleted bool) error) error {
		if err := fn([]byte("p"), []byte("pos"), binary.BigEndian.AppendUint64(nil, d.pos), false); err != nil {
			return err
		}
		return fn([]byte("p"), []byte("sum"), binary.BigEndian.AppendUint64(nil, d.sum), false)
	})
	if err != nil {
		return err
	}
	w.position[id] = d.pos
	if err := d.store.WriteManifest(&checkpoint.Manifest{
		FormatVersion: checkpoint.ManifestVersion, ID: id, Time: time.Unix(1700000000, 0).UTC(), Kind: checkpoint.KindFull,
		Files: []checkpoint.FileRef{ref}, SourcePositions: map[string]uint64{"src": d.pos},
	}); err != nil {
		return err
	}
	w.completed[id], w.newest = d.pos, id
	d.epoch++
	if err := d.out.Commit(id); err != nil {
		return err
	}
	if _, err := d.store.Retain(plRetain); err != nil {
		return err
	}
	ids, err := d.store.ManifestIDs()
	if err != nil {
		return err
	}
	return d.log.Truncate(w.position[ids[0]] + 1)
}

// recover opens the components on what the disk holds after a power cut,
// through their own recovery paths, checks every guarantee, and leaves
// the device ready to run from the restored checkpoint. The power may fail
// again during the components' recovery (p armed), not during what the
// test itself does after it (consuming the output, restarting the WAL).
func (w *plWorld) recover(p *vfs.CutFS) (*plDevice, error) {
	d := &plDevice{fs: p}
	var err error
	if d.log, err = ingest.Open(plIngestDir, ingest.Options{FS: p, SegmentBytes: ingest.MinSegmentBytes}); err != nil {
		return nil, err
	}
	if err := w.checkLog(d.log); err != nil {
		return nil, err
	}
	if d.store, err = checkpoint.OpenStore(p, plStoreDir); err != nil {
		return nil, err
	}
	restored, err := w.checkCheckpoints(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.store.CollectGarbage(); err != nil {
		return nil, err
	}
	if d.out, err = sink.OpenTwoPhaseFile(p, plOutDir); err != nil {
		return nil, err
	}
	if err := d.out.Recover(restored); err != nil {
		return nil, err
	}
	count, err := w.checkWAL(d, restored)
	if err != nil {
		return nil, err
	}
	p.Arm(0)
	if err := w.consumeParts(p, d.pos); err != nil {
		return nil, err
	}
	return d, w.restartWAL(d, count)
}

// checkLog: every acknowledged entry, and every entry an earlier recovery
// found, is in the log at its offset; an entry after them is one whose
// append the power cut interrupted.
func (w *plWorld) checkLog(l *ingest.Log) error {
	if last := l.LastOffset(); last < uint64(len(w.content)) {
		return fmt.Errorf("acknowledged messages lost: the log ends at offset %d, %d were acknowledged", last, len(w.content))
	}
	return forEachKey(l, l.FirstOffset(), func(off, k uint64) error {
		switch {
		case off <= uint64(len(w.content)):
			if want := w.content[off-1]; k != want {
				return fmt.Errorf("acknowledged message lost: log offset %d holds %d, not %d", off, k, want)
			}
		case !w.attempted[k]:
			return fmt.Errorf("log offset %d holds %d, which was never appended or is there twice", off, k)
		default:
			w.know(k)
		}
		return nil
	})
}

// checkCheckpoints: every visible checkpoint restores and holds the state
// of the log up to its position; the newest plRetain completed ones are
// visible unless retention removed them for newer ones; the newest that verifies is restored into d. It returns its id
// (0: none).
func (w *plWorld) checkCheckpoints(d *plDevice) (uint64, error) {
	ids, err := d.store.ManifestIDs()
	if err != nil {
		return 0, err
	}
	done := slices.Sorted(func(yield func(uint64) bool) {
		for id := range w.completed {
			if !yield(id) {
				return
			}
		}
	})
	for _, id := range done[max(0, len(done)-plRetain):] {
		// Retention keeps the plRetain newest manifests, counting those
		// whose WriteManifest the power cut interrupted after the rename.
		newer := len(ids) - sort.Search(len(ids), func(i int) bool { return ids[i] > id })
		if !slices.Contains(ids, id) && newer < plRetain {
			return 0, fmt.Errorf("completed checkpoint %d lost: the store holds %v", id, ids)
		}
	}
	type state struct{ pos, sum uint64 }
	states := map[uint64]state{}
	for _, id := range ids {
		sel, err := d.store.SelectRestore(strconv.FormatUint(id, 10))
		if err != nil {
			_, completed := w.completed[id]
			return 0, fmt.Errorf("checkpoint %d (completed: %t) does not restore: %w", id, completed, err)
		}
		pos, sum, err := w.checkState(d, id, sel)
		if err != nil {
			return 0, err
		}
		states[id] = state{pos, sum}
	}
	sel, err := d.store.SelectRestore("")
	if errors.Is(err, checkpoint.ErrNoCheckpoint) && w.newest == 0 {
		d.epoch = sel.NewestID + 1
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("completed checkpoint %d lost: %w", w.newest, err)
	}
	if len(sel.Skipped) > 0 {
		return 0, fmt.Errorf("restore skipped damaged checkpoints: %v", sel.Skipped)
	}
	if sel.Manifest.ID < w.newest {
		return 0, fmt.Errorf("completed checkpoint %d lost: restore chose %d", w.newest, sel.Manifest.ID)
	}
	st := states[sel.Manifest.ID]
	d.pos, d.sum, d.epoch = st.pos, st.sum, sel.NewestID+1
	return sel.Manifest.ID, nil
}

// checkState reads checkpoint id's state and checks it is the log's up to
// its position, and that the log still holds what a replay from there needs.
func (w *plWorld) checkState(d *plDevice, id uint64, sel checkpoint.Selection) (pos, sum uint64, err error) {
	for _, ref := range sel.Files {
		err := sel.Store.ReadSnapshot(ref, func(bucket, key, value []byte, deleted bool) error {
			switch string(key) {
			case "pos":
				pos = binary.BigEndian.Uint64(value)
			case "sum":
				sum = binary.BigEndian.Uint64(value)
			}
			return nil
		})
		if err != nil {
			return 0, 0, err
		}
	}
	if got := sel.Manifest.SourcePositions["src"]; got != pos {
		return 0, 0, fmt.Errorf("checkpoint %d: manifest position %d, snapshot %d", id, got, pos)
	}
	if want, ok := w.completed[id]; ok && pos != want {
		return 0, 0, fmt.Errorf("checkpoint %d restores position %d, completed at %d", id, pos, want)
	}
	if pos > uint64(len(w.content)) || w.prefix[pos] != sum {
		return 0, 0, fmt.Errorf("checkpoint %d's state (position %d, sum %d) is not the log's", id, pos, sum)
	}
	if first := d.log.FirstOffset(); first > pos+1 {
		return 0, 0, fmt.Errorf("checkpoint %d cannot replay: the log starts at offset %d, after its position %d", id, first, pos)
	}
	return pos, sum, nil
}

// consumeParts reads the 2PC sink's committed parts as a consumer would,
// oldest first, removes them, and checks the output so far is the log's
// messages up to the restored position, each exactly once.
func (w *plWorld) consumeParts(p *vfs.CutFS, upTo uint64) error {
	names, err := p.List(plOutDir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if !strings.HasPrefix(name, "part-") {
			continue
		}
		f, err := p.Open(filepath.Join(plOutDir, name))
		if err != nil {
			return err
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return err
		}
		for line := range strings.Lines(string(b)) {
			k, err := strconv.ParseUint(strings.TrimSuffix(line, "\n"), 10, 64)
			if err != nil || !strings.HasSuffix(line, "\n") {
				return fmt.Errorf("committed part %s holds a damaged line %q", name, line)
			}
			if w.consumed >= uint64(len(w.content)) || w.content[w.consumed] != k {
				return fmt.Errorf("committed output lost, doubled or out of order: part %s has %d after %d lines", name, k, w.consumed)
			}
			w.consumed++
		}
		if err := p.Remove(filepath.Join(plOutDir, name)); err != nil {
			return err
		}
	}
	if err := p.SyncDir(plOutDir); err != nil {
		return err
	}
	if w.consumed != upTo {
		return fmt.Errorf("committed output lost: %d lines committed, the restored checkpoint counts %d", w.consumed, upTo)
	}
	return nil
}

// checkWAL opens the WAL and checks that it holds every frame synced since
// the last recovery (and then at most a prefix of the unsynced ones), and
// that its committed output (data of epochs ≤ the restored checkpoint)
// continues the output before exactly up to the restored position, which
// it returns.
func (w *plWorld) checkWAL(d *plDevice, restored uint64) (uint64, error) {
	var frames [][]byte
	l, err := wal.Open(d.fs, plWALDir, func(_ uint64, p []byte) error {
		frames = append(frames, bytes.Clone(p))
		return nil
	})
	if err != nil {
		return 0, err
	}
	d.wal = l
	var count uint64 // output lines before this run's frames
	if len(frames) > 0 {
		s := frames[0]
		if s[0] != 'S' {
			return 0, fmt.Errorf("WAL starts with a %q frame, not the summary", s[0])
		}
		count, _ = binary.Uvarint(s[1:])
		frames = frames[1:]
	} else if len(w.content) > 0 {
		return 0, errors.New("WAL lost: no segment")
	}
	if len(frames) < w.walSynced || len(frames) > len(w.walFrames) {
		return 0, fmt.Errorf("WAL frames lost: %d recovered, %d were synced, %d written", len(frames), w.walSynced, len(w.walFrames))
	}
	for i, f := range frames {
		if !bytes.Equal(f, w.walFrames[i]) {
			return 0, fmt.Errorf("WAL frame %d differs from the one written", i)
		}
		if f[0] != 'D' {
			continue
		}
		epoch, n := binary.Uvarint(f[1:])
		k, _ := binary.Uvarint(f[1+n:])
		if epoch > restored {
			continue // not committed: the replay writes it again
		}
		if count >= uint64(len(w.content)) || w.content[count] != k {
			return 0, fmt.Errorf("WAL output lost, doubled or out of order: %d after %d messages", k, count)
		}
		count++
	}
	if count != d.pos {
		return 0, fmt.Errorf("WAL output lost: %d messages committed, the restored checkpoint counts %d", count, d.pos)
	}
	return count, nil
}

// restartWAL starts a new segment with the summary of the committed output
// (count messages) and removes the old ones, as the WAL sink does with its
// state.
func (w *plWorld) restartWAL(d *plDevice, count uint64) error {
	l := d.wal
	old := l.Segments()
	if _, err := l.Rotate(wal.AppendFrame(nil, binary.AppendUvarint([]byte{'S'}, count))); err != nil {
		return err
	}
	for _, s := range old {
		if err := l.Remove(s.ID); err != nil {
			return err
		}
	}
	w.walFrames, w.walSynced = nil, 0
	return nil
}

// TestPowerLoss: thousands of append → ack → checkpoint → power cut →
// recover cycles on vfs.NewCrashableMem through vfs.CutFS, the cut in the
// middle of a random file operation (mid-append, mid-checkpoint,
// mid-commit; a write in flight lands a random prefix, a sync or rename
// lands or not), torn writes and written-back directories at random. After every cut, recovered by the
// components' own recovery paths: every acknowledged message is in the
// ingest log; every completed checkpoint (of those retention keeps)
// restores, with the state of the log up to its position; the 2PC file
// sink's committed parts and the WAL's committed records hold the log's
// messages up to the restored checkpoint, each exactly once.
func TestPowerLoss(t *testing.T) {
	t.Logf("seed %d, %d cycles (-powerloss.seed, -powerloss.cycles)", *powerLossSeed, *powerLossCycles)
	if err := runPowerLoss(*powerLossSeed, *powerLossCycles, nil); err != nil {
		t.Fatal(err)
	}
}

// detectsBroken runs the power-loss cycles with the fsync discipline broken
// by breakFsync and fails t unless they find a broken guarantee whose error
// says want. A missing fsync of a directory that is made once (a parent of
// the log's or the store's directory) shows only at the first cut after it
// is made, and only when that cut's writeback leaves the directory out (one
// time in two), so the cycles are tried from up to detectSeeds seeds, each
// with fewer cycles: deterministic for a given -powerloss.seed, and a miss
// of all of them would take odds of 1 in 2^detectSeeds.
func detectsBroken(t *testing.T, breakFsync func(*vfs.CutOptions), want string) {
	t.Helper()
	const detectSeeds = 16
	for seed := *powerLossSeed; seed < *powerLossSeed+detectSeeds; seed++ {
		err := runPowerLoss(seed, min(*powerLossCycles, 400), breakFsync)
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%v, want an error saying %q", err, want)
		}
		t.Log(err)
		return
	}
	t.Fatalf("seeds %d to %d found nothing broken, want an error saying %q", *powerLossSeed, *powerLossSeed+detectSeeds-1, want)
}

// TestCrashFS_DetectsMissingDirSync: with the fsync of one directory left
// out, the power-loss cycles find the loss.
func TestCrashFS_DetectsMissingDirSync(t *testing.T) {
	tests := []struct{ dir, want string }{
		{plStoreDir + "/manifests", "completed checkpoint"},
		{plStoreDir, "completed checkpoint"}, // holds manifests/ itself
		{plIngestDir, "acknowledged messages lost"},
		{filepath.Dir(plIngestDir), "acknowledged messages lost"}, // holds the log's directory
		{plOutDir, "committed output"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			detectsBroken(t, func(o *vfs.CutOptions) {
				o.BreakSyncDir = func(dir string) bool { return dir == tt.dir }
			}, tt.want)
		})
	}
}

// TestCrashFS_DetectsRenameBeforeSync: with the fsync before a rename left
// out (the rename then publishes contents that are not durable), the
// power-loss cycles find the damage.
func TestCrashFS_DetectsRenameBeforeSync(t *testing.T) {
	tests := []struct{ suffix, want string }{
		{".json.tmp", "does not restore"},
		{".snap.tmp", "does not restore"},
		{".jsonl.inprogress", "committed"},
	}
	for _, tt := range tests {
		t.Run(tt.suffix, func(t *testing.T) {
			detectsBroken(t, func(o *vfs.CutOptions) {
				o.BreakSync = func(name string) bool { return strings.HasSuffix(name, tt.suffix) }
			}, tt.want)
		})
	}
}
