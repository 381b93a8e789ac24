package walsink

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/state/vfs"
)

// committedPayloads returns the payloads the sink may publish: its data
// records up to the committed position, aborted ones left out, in order.
func committedPayloads(t *testing.T, s *Sink) [][]byte {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	segs := s.wal.Segments()
	c := newCursor(s.wal, segs[0].ID)
	defer c.close()
	var out [][]byte
	for {
		d, ok, err := c.peek()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		if d.seq <= s.st.committedSeq && !s.st.isAborted(d.seq) {
			out = append(out, bytes.Clone(d.payload))
		}
		c.advance()
	}
}

// TestSink_PowerLoss: runs of write → pre-commit → checkpoint completes →
// commit on vfs.NewCrashableMem through vfs.CutFS, the power cut in the
// middle of a random file operation (a WAL write in flight lands a random
// prefix, a sync or rename lands or not), also during Open and Recover,
// with torn writes and written-back directories at random. A checkpoint
// completes only when PreCommit returned. After every cut, Open and
// Recover(the last completed checkpoint) must leave exactly the messages of
// the completed epochs publishable, in order, each once. Nothing is
// published (no broker), so the WAL only grows and every recovery adds an
// aborted range that Open's scan checks each record against: a few hundred
// cycles keep that scan short.
func TestSink_PowerLoss(t *testing.T) {
	if err := runSinkPowerLoss(t, 1, 300, nil); err != nil {
		t.Fatal(err)
	}
}

// TestSink_PowerLossDetectsBrokenFsync: with the WAL's fsync left out, the
// same cycles find completed messages lost.
func TestSink_PowerLossDetectsBrokenFsync(t *testing.T) {
	err := runSinkPowerLoss(t, 1, 300, func(o *vfs.CutOptions) {
		o.BreakSync = func(string) bool { return true }
	})
	if err == nil || !strings.Contains(err.Error(), "publishable") {
		t.Fatalf("%v, want an error saying \"publishable\"", err)
	}
	t.Log(err)
}

// runSinkPowerLoss runs TestSink_PowerLoss's cycles from seed, the fsync
// discipline broken by breakFsync when set, and returns the first broken
// guarantee.
func runSinkPowerLoss(t *testing.T, seed uint64, cycles int, breakFsync func(*vfs.CutOptions)) error {
	rng := rand.New(rand.NewPCG(seed, 2))
	disk := vfs.NewCrashableMem()
	var want [][]byte // the payloads of the completed epochs, in order
	var completed uint64
	key := 0
	for cycle := range cycles {
		var s *Sink
		var power *vfs.CutFS
		for s == nil {
			opts := vfs.CutOptions{Rand: rng}
			if breakFsync != nil {
				breakFsync(&opts)
			}
			power = vfs.NewCutFS(disk, opts)
			if rng.IntN(4) == 0 {
				power.Arm(1 + rng.IntN(12)) // the power fails again while recovering
			}
			var err error
			s, err = Open("/data/wal/out", Options{Broker: "tcp://127.0.0.1:1", ClientID: "offline",
				ReconnectMin: time.Hour, SegmentBytes: 16 << 10, FS: power}, testLogger(t))
			if err == nil {
				if err = s.Recover(completed); err != nil {
					s.Close()
					s = nil
				}
			}
			if img := power.Image(); img != nil {
				if s != nil {
					s.Close()
					s = nil
				}
				disk = img
				continue
			}
			if err != nil {
				return fmt.Errorf("seed %d, cycle %d: Open and Recover(%d) after the power cut: %w", seed, cycle, completed, err)
			}
		}
		power.Arm(0)
		got := committedPayloads(t, s)
		if len(got) != len(want) {
			return fmt.Errorf("seed %d, cycle %d: %d messages publishable, %d completed", seed, cycle, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				return fmt.Errorf("seed %d, cycle %d: publishable message %d is %q, want %q", seed, cycle, i, got[i], want[i])
			}
		}
		power.Arm(1 + rng.IntN(30))
		// cut reports whether err is the power cut's; any other is a failure.
		cut := func(op string, err error) bool {
			if err != nil && power.Image() == nil {
				t.Fatalf("cycle %d: %s: %v", cycle, op, err)
			}
			return err != nil
		}
		epoch, pending := completed+1, [][]byte(nil)
	run:
		for range 1 + rng.IntN(10) {
			switch rng.IntN(3) {
			case 0, 1:
				batch := make([]Message, 1+rng.IntN(5))
				for i := range batch {
					key++
					batch[i] = Message{Topic: "up/r", Payload: strconv.AppendInt(nil, int64(key), 10)}
				}
				if cut("Write", s.Write(epoch, batch)) {
					break run
				}
				for _, m := range batch {
					pending = append(pending, m.Payload)
				}
			case 2:
				if cut("PreCommit", s.PreCommit(epoch)) {
					break run
				}
				if rng.IntN(4) == 0 {
					break run // the checkpoint never completes
				}
				want, completed, pending = append(want, pending...), epoch, nil
				if rng.IntN(4) == 0 {
					break run // completed, but cut before the commit
				}
				if cut("Commit", s.Commit(epoch)) {
					break run
				}
				epoch++
			}
		}
		power.Cut()
		disk = power.Image()
		s.Close()
	}
	return nil
}
