package agent

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/sink"
)

// orderedTx records the calls a transactional sink gets and enforces the
// WAL sink's contract: epochs never decrease, and no epoch at or below a
// pre-committed one is written.
type orderedTx struct {
	calls     []string
	lastEpoch uint64
	preDone   uint64
	err       error
}

func (o *orderedTx) Write(epoch uint64, items []sink.Item) error {
	if epoch < o.lastEpoch || epoch <= o.preDone {
		o.err = fmt.Errorf("write of epoch %d after epoch %d, pre-committed %d", epoch, o.lastEpoch, o.preDone)
		return o.err
	}
	o.lastEpoch = epoch
	for _, it := range items {
		o.calls = append(o.calls, fmt.Sprintf("W%d:%s", epoch, it.Payload))
	}
	return nil
}

func (o *orderedTx) PreCommit(epoch uint64) error {
	o.preDone = epoch
	o.calls = append(o.calls, fmt.Sprintf("P%d", epoch))
	return nil
}

func (o *orderedTx) Commit(uint64) error  { return nil }
func (o *orderedTx) Recover(uint64) error { return nil }
func (o *orderedTx) Close() error         { return nil }

func delivery(payload string) *operators.Delivery {
	d := new(operators.Delivery)
	d.AddRaw([]byte(payload))
	return d
}

// TestSinkRunner_HoldsEarlyEpochs: with two producers, one past barrier n
// sends epoch n+1 while the other still sends epoch n. The runner must
// write epoch n+1 only after PreCommit(n): written earlier, it would be
// inside checkpoint n's pre-commit (published before checkpoint n+1
// completes) or make the slower producer's epoch-n write go backwards.
func TestSinkRunner_HoldsEarlyEpochs(t *testing.T) {
	tx := &orderedTx{}
	r := newSinkRunner("s", slog.New(slog.DiscardHandler), func() {})
	r.tx = tx
	r.addProducers(2)
	msgs := []sinkMsg{
		{d: delivery("a1"), epoch: 1},
		{d: delivery("b1"), epoch: 1},
		{barrier: 1},                  // producer A passes barrier 1
		{d: delivery("a2"), epoch: 2}, // early: B has not passed barrier 1
		{d: delivery("b1'"), epoch: 1},
		{barrier: 2},                  // A passes barrier 2
		{d: delivery("a3"), epoch: 3}, // early
		{barrier: 1},                  // B passes barrier 1: P1, then a2
		{d: delivery("b2"), epoch: 2},
		{barrier: 2}, // B: P2, then a3
		{d: delivery("b3"), epoch: 3},
	}
	go r.run()
	for _, m := range msgs {
		r.in <- m
	}
	close(r.in)
	<-r.done
	if tx.err != nil {
		t.Fatal(tx.err)
	}
	want := []string{"W1:a1", "W1:b1", "W1:b1'", "P1", "W2:a2", "W2:b2", "P2", "W3:a3", "W3:b3"}
	if !slices.Equal(tx.calls, want) {
		t.Fatalf("calls\n got %v\nwant %v", tx.calls, want)
	}
}

// TestSinkRunner_WritesHeldAtClose: deliveries held for a barrier that never
// aligns (a producer ended first) are written at close, after everything
// else, so the sink sees them as the uncommitted epoch they are.
func TestSinkRunner_WritesHeldAtClose(t *testing.T) {
	tx := &orderedTx{}
	r := newSinkRunner("s", slog.New(slog.DiscardHandler), func() {})
	r.tx = tx
	r.addProducers(2)
	go r.run()
	for _, m := range []sinkMsg{
		{d: delivery("a1"), epoch: 1},
		{barrier: 1},
		{d: delivery("a2"), epoch: 2},
		{d: delivery("b1"), epoch: 1},
	} {
		r.in <- m
	}
	close(r.in)
	<-r.done
	if tx.err != nil {
		t.Fatal(tx.err)
	}
	want := []string{"W1:a1", "W1:b1", "W2:a2"}
	if !slices.Equal(tx.calls, want) {
		t.Fatalf("calls\n got %v\nwant %v", tx.calls, want)
	}
}
