package walsink

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/vfs"
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
// commit on vfs.NewCrashableMem, the power cut between any two calls (with
// torn writes and written-back directories at random). After every cut,
// Open and Recover(the last completed checkpoint) must leave exactly the
// messages of the completed epochs publishable, in order, each once.
func TestSink_PowerLoss(t *testing.T) {
	const seed = 1
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	disk := vfs.NewCrashableMem()
	var want [][]byte // the payloads of the completed epochs, in order
	var completed uint64
	key := 0
	for cycle := range 300 {
		s, err := Open("/data/wal/out", Options{Broker: "tcp://127.0.0.1:1", ClientID: "offline",
			ReconnectMin: time.Hour, SegmentBytes: 16 << 10, FS: disk}, testLogger(t))
		if err != nil {
			t.Fatalf("cycle %d: Open after the power cut: %v", cycle, err)
		}
		if err := s.Recover(completed); err != nil {
			t.Fatalf("cycle %d: Recover(%d): %v", cycle, completed, err)
		}
		got := committedPayloads(t, s)
		if len(got) != len(want) {
			t.Fatalf("cycle %d: %d messages publishable, %d completed", cycle, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("cycle %d: message %d is %q, want %q", cycle, i, got[i], want[i])
			}
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
					pending = append(pending, batch[i].Payload)
				}
				if err := s.Write(epoch, batch); err != nil {
					t.Fatalf("cycle %d: Write: %v", cycle, err)
				}
			case 2:
				if err := s.PreCommit(epoch); err != nil {
					t.Fatalf("cycle %d: PreCommit: %v", cycle, err)
				}
				if rng.IntN(4) == 0 {
					break run // the checkpoint never completes
				}
				want, completed, pending = append(want, pending...), epoch, nil
				if rng.IntN(4) == 0 {
					break run // completed, but cut before the commit
				}
				if err := s.Commit(epoch); err != nil {
					t.Fatalf("cycle %d: Commit: %v", cycle, err)
				}
				epoch++
			}
		}
		disk = disk.CrashClone(vfs.CrashOptions{Rand: rng})
		s.Close()
	}
}
