package agent

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/eddy-edge/eddy/agent/stages"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/record"
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

func (o *orderedTx) Write(epoch uint64, items []record.Item) error {
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
	msgs := []stages.SinkMsg{
		{Delivery: delivery("a1"), Epoch: 1},
		{Delivery: delivery("b1"), Epoch: 1},
		{Barrier: 1},                         // producer A passes barrier 1
		{Delivery: delivery("a2"), Epoch: 2}, // early: B has not passed barrier 1
		{Delivery: delivery("b1'"), Epoch: 1},
		{Barrier: 2},                         // A passes barrier 2
		{Delivery: delivery("a3"), Epoch: 3}, // early
		{Barrier: 1},                         // B passes barrier 1: P1, then a2
		{Delivery: delivery("b2"), Epoch: 2},
		{Barrier: 2}, // B: P2, then a3
		{Delivery: delivery("b3"), Epoch: 3},
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
	for _, m := range []stages.SinkMsg{
		{Delivery: delivery("a1"), Epoch: 1},
		{Barrier: 1},
		{Delivery: delivery("a2"), Epoch: 2},
		{Delivery: delivery("b1"), Epoch: 1},
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

// TestSinkRunner_RandomInterleavings: producers each send deliveries and
// barriers 1..n in order, interleaved at random into the runner. Every
// delivery is written exactly once, epochs never go backwards, and
// PreCommit(b) comes after every delivery of an epoch ≤ b and before any
// of a later one.
func TestSinkRunner_RandomInterleavings(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		producers := 1 + rng.IntN(3)
		barriers := 1 + rng.IntN(6)
		queues := make([][]stages.SinkMsg, producers)
		total := 0
		for p := range queues {
			for e := uint64(1); e <= uint64(barriers)+1; e++ {
				for range rng.IntN(4) {
					queues[p] = append(queues[p], stages.SinkMsg{Delivery: delivery(fmt.Sprintf("p%d-%d", p, total)), Epoch: e})
					total++
				}
				if e <= uint64(barriers) {
					queues[p] = append(queues[p], stages.SinkMsg{Barrier: e})
				}
			}
		}
		tx := &orderedTx{}
		r := newSinkRunner("s", slog.New(slog.DiscardHandler), func() {})
		r.tx = tx
		r.addProducers(producers)
		go r.run()
		for {
			var live []int
			for p, q := range queues {
				if len(q) > 0 {
					live = append(live, p)
				}
			}
			if len(live) == 0 {
				break
			}
			p := live[rng.IntN(len(live))]
			r.in <- queues[p][0]
			queues[p] = queues[p][1:]
		}
		close(r.in)
		<-r.done
		if tx.err != nil {
			t.Fatalf("seed %d: %v", seed, tx.err)
		}
		writes, pre := 0, uint64(0)
		seen := map[string]bool{}
		for _, c := range tx.calls {
			var e uint64
			if _, err := fmt.Sscanf(c, "P%d", &e); err == nil {
				if e != pre+1 {
					t.Fatalf("seed %d: PreCommit(%d) after PreCommit(%d): %v", seed, e, pre, tx.calls)
				}
				pre = e
				continue
			}
			var payload string
			if _, err := fmt.Sscanf(c, "W%d:%s", &e, &payload); err != nil {
				t.Fatalf("seed %d: call %q", seed, c)
			}
			if e != pre+1 {
				t.Fatalf("seed %d: write of epoch %d between PreCommit(%d) and the next: %v", seed, e, pre, tx.calls)
			}
			if seen[payload] {
				t.Fatalf("seed %d: %s written twice", seed, payload)
			}
			seen[payload] = true
			writes++
		}
		if writes != total || pre != uint64(barriers) {
			t.Fatalf("seed %d: %d of %d deliveries written, pre-committed up to %d of %d: %v", seed, writes, total, pre, barriers, tx.calls)
		}
	}
}

// brokenAt is an at-least-once sink that breaks as the file sink does on
// a full disk, at the write of one payload: that write and every later
// Write and Flush fail.
type brokenAt struct {
	log     *[]string
	breakOn string
	broken  bool
}

func (b *brokenAt) Write(items []record.Item) error {
	for _, it := range items {
		if string(it.Payload) == b.breakOn {
			b.broken = true
		}
		if b.broken {
			return fmt.Errorf("write: %w", syscall.ENOSPC)
		}
		*b.log = append(*b.log, "W:"+string(it.Payload))
	}
	return nil
}

func (b *brokenAt) Flush() error {
	if b.broken {
		return fmt.Errorf("flush: %w", syscall.ENOSPC)
	}
	*b.log = append(*b.log, "F")
	return nil
}

func (b *brokenAt) Close() error { return nil }

// sentTo records what a sink runner tells the checkpointer.
type sentTo struct{ log *[]string }

func (s sentTo) Send(m checkpoint.Message) {
	switch m := m.(type) {
	case checkpoint.Ack:
		*s.log = append(*s.log, fmt.Sprintf("ack %d %s", m.CheckpointID, m.Task))
	case checkpoint.Failure:
		*s.log = append(*s.log, fmt.Sprintf("fail %d %s", m.CheckpointID, m.Task))
	}
}

// TestSinkRunner_AtLeastOnceAcksAfterFlush: an at-least-once sink is a
// checkpoint task. It acknowledges barrier n only after a flush handed on
// what came before it, and a sink broken before the barrier (a write of
// epoch n met a full disk) fails checkpoint n, so that the restart
// replays those results. Acknowledged anyway, or not asked, checkpoint n
// would complete with the source past them and lose them.
func TestSinkRunner_AtLeastOnceAcksAfterFlush(t *testing.T) {
	var log []string // the runner's goroutine writes it; read after done
	out := &brokenAt{log: &log, breakOn: "b2"}
	r := newSinkRunner("s", slog.New(slog.DiscardHandler), func() {})
	r.plain = out
	r.ckpt = sentTo{log: &log}
	var fatal []error
	r.fatal = func(err error) { fatal = append(fatal, err) }
	r.addProducers(2)
	if !r.isTask() {
		t.Fatal("an at-least-once sink with producers is no checkpoint task")
	}
	go r.run()
	for _, m := range []stages.SinkMsg{
		{Delivery: delivery("a1")},
		{Barrier: 1},
		{Delivery: delivery("b1")},
		{Barrier: 1}, // aligned: flush, then ack 1
		{Delivery: delivery("a2")},
		{Barrier: 2},
		{Delivery: delivery("b2")}, // meets the full disk
		{Barrier: 2},               // aligned: the flush fails, so does checkpoint 2
	} {
		r.in <- m
	}
	close(r.in)
	<-r.done
	var answers []string
	for _, l := range log {
		if strings.HasPrefix(l, "ack") || strings.HasPrefix(l, "fail") {
			answers = append(answers, l)
		}
	}
	if want := []string{"ack 1 sink/s", "fail 2 sink/s"}; !slices.Equal(answers, want) {
		t.Fatalf("answers to barriers %v, want %v (log %v)", answers, want, log)
	}
	ack1, b1 := slices.Index(log, "ack 1 sink/s"), slices.Index(log, "W:b1")
	if b1 < 0 || !slices.Contains(log[b1:ack1], "F") {
		t.Fatalf("barrier 1 acknowledged before b1 was flushed: %v", log)
	}
	if len(fatal) == 0 {
		t.Fatal("a sink broken by a full disk did not fail its region")
	}
}

// TestSinkRunner_UnusedSinkIsNoTask: a sink no pipeline writes to sees no
// barrier; as a task it would hold every checkpoint up.
func TestSinkRunner_UnusedSinkIsNoTask(t *testing.T) {
	r := newSinkRunner("s", slog.New(slog.DiscardHandler), func() {})
	r.plain = &brokenAt{log: new([]string)}
	if r.isTask() {
		t.Fatal("a sink without producers is a checkpoint task")
	}
}
