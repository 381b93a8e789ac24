package agent

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/operators/io/sink"
	"github.com/eddy-edge/eddy/operators/io/walsink"
	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// TestWALTx_CommitWhileWriteBlocked: with the uplink down and the WAL full
// of committed backlog, the sink runner's Write of the next epoch blocks
// (when_full = "block"). The checkpointer's Commit of the epoch before must
// still return at once: it used to wait for a lock the blocked Write held,
// which stopped the checkpointer (no commit, no timeout, no ingest log
// truncation) for as long as the uplink was down.
func TestWALTx_CommitWhileWriteBlocked(t *testing.T) {
	down := "tcp://" + loopback.Addr(t) // nothing listens: the uplink is down

	ws, err := walsink.Open(t.TempDir(), walsink.Options{Broker: down, ClientID: "waltx-test",
		MaxDiskBytes: 256 << 10, ReconnectMin: time.Second, WhenFull: walsink.Block}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := sink.ParseTemplate("up/test", nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &walTx{s: ws, topic: tmpl, deviceID: "d"}
	items := make([]record.Item, 100)
	for i := range items {
		items[i].Payload = bytes.Repeat([]byte{'x'}, 1000)
	}
	// Epoch 1 committed (backlog), epoch 2 pre-committed, awaiting commit.
	for e := uint64(1); e <= 2; e++ {
		for range 2 {
			if err := w.Write(e, items); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.PreCommit(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(1); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() { wrote <- w.Write(3, items) }()
	for !ws.Stats().WriteBlocked {
		select {
		case err := <-wrote:
			t.Fatalf("Write returned (%v) on a full WAL with the uplink down: %+v", err, ws.Stats())
		case <-time.After(5 * time.Millisecond):
		}
	}

	committed := make(chan error, 1)
	go func() { committed <- w.Commit(2) }()
	select {
	case err := <-committed:
		if err != nil {
			t.Fatalf("Commit(2): %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Commit(2) waits for the blocked Write")
	}
	if st := ws.Stats(); !st.WriteBlocked || st.BacklogMessages != 400 {
		t.Fatalf("after Commit(2): %+v; want the Write still blocked and 400 messages of backlog", st)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; !errors.Is(err, walsink.ErrClosed) {
		t.Fatalf("blocked Write after Close: %v, want ErrClosed", err)
	}
}
