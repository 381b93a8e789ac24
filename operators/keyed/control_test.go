package keyed

import (
	"fmt"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/state"
)

// TestBuffer_ControlAcrossRestore buffers readings in event-time order,
// checkpoints the buffer and restores it into an operator whose pipeline
// captures control values or not, and checks what each released reading
// carries: its payload always, its captured values when it has them. A
// buffer written before captured values existed (or by a pipeline reading
// none) restores into one that captures them with none (its readings'
// expressions then see every control value missing); one written with
// them restores into one that captures none with its payloads intact.
func TestBuffer_ControlAcrossRestore(t *testing.T) {
	for _, c := range []struct {
		name              string
		before, after     bool // Options.Control of the checkpointed and the restored operator
		wantFromSnapshot  string
		wantAfterRestored string
	}{
		{"with control values", true, true, "p1|c1 p2|c2", "p3|c3"},
		{"written without them", false, true, "p1| p2|", "p3|c3"},
		{"restored without them", true, false, "p1|c1 p2|c2", "p3|"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			h := func(r *Reading) error {
				got = append(got, fmt.Sprintf("%s|%s", r.Payload, r.Control))
				return nil
			}
			be := state.NewMemory()
			op, err := New(be, Options{Order: EventTime, Control: c.before})
			if err != nil {
				t.Fatal(err)
			}
			for i, ts := range []int64{2000, 1000} {
				r := Reading{Key: []byte("k"), KeyGroup: 3, Time: ts, Seq: uint64(i), Payload: []byte(fmt.Sprintf("p%d", 2-i))}
				if c.before {
					r.Control = []byte(fmt.Sprintf("c%d", 2-i))
				}
				if out, err := op.Process(&r, 0, h); err != nil || out != Buffered {
					t.Fatalf("process: %v, %v", out, err)
				}
			}
			if err := op.Flush(); err != nil {
				t.Fatal(err)
			}
			snap, err := be.Snapshot(true)
			if err != nil {
				t.Fatal(err)
			}
			be = state.NewMemory()
			if op, err = New(be, Options{Order: EventTime, Control: c.after}); err != nil {
				t.Fatal(err)
			}
			if err := be.Restore(snap.Entries, state.RestoreOptions{}); err != nil {
				t.Fatal(err)
			}
			snap.Close()
			r := Reading{Key: []byte("k"), KeyGroup: 3, Time: 3000, Seq: 9, Payload: []byte("p3")}
			if c.after {
				r.Control = []byte("c3")
			}
			if _, err := op.Process(&r, 0, h); err != nil {
				t.Fatal(err)
			}
			if err := op.AdvanceWatermark(2000, h); err != nil {
				t.Fatal(err)
			}
			if g := strings.Join(got, " "); g != c.wantFromSnapshot {
				t.Errorf("from the snapshot: %s, want %s", g, c.wantFromSnapshot)
			}
			got = nil
			if err := op.AdvanceWatermark(3000, h); err != nil {
				t.Fatal(err)
			}
			if g := strings.Join(got, " "); g != c.wantAfterRestored {
				t.Errorf("after the restore: %s, want %s", g, c.wantAfterRestored)
			}
		})
	}
}
