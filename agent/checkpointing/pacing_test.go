package checkpointing

import (
	"testing"

	"github.com/eddy-edge/eddy/checkpoint"
)

// fakeSource is a Source whose forwarded count and ingest log state the
// test sets.
type fakeSource struct {
	sent uint64
	in   IngestState
}

func (s *fakeSource) InjectBarrier(checkpoint.Trigger) {}
func (s *fakeSource) Forwarded() uint64                { return s.sent }
func (s *fakeSource) Ingest() IngestState              { return s.in }

// TestDriver_FullIngestLogIsNotIdle: a driver with nothing forwarded since
// its last checkpoint skips the periodic one, except while a source's
// ingest log is full: only a checkpoint can let that log shrink and its
// messages in.
func TestDriver_FullIngestLogIsNotIdle(t *testing.T) {
	s := &fakeSource{in: IngestState{Full: true, ReadToEnd: true}}
	c := &Driver{sources: []Source{s}}
	if c.unchanged() {
		t.Fatal("unchanged() = true while the ingest log is full: the checkpoint that lets it shrink would be skipped")
	}
	s.in = IngestState{}
	if !c.unchanged() {
		t.Fatal("unchanged() = false with nothing forwarded and the log taking appends again")
	}
}

// TestDriver_IngestWaits: a full ingest log whose reader has forwarded
// everything asks for a checkpoint at once when something was forwarded
// since the last trigger, or, with nothing forwarded, when the last
// checkpoint completed before the log filled (it truncated only below the
// oldest retained one); not while the reader is behind, and not again once
// a checkpoint completed with the log full.
func TestDriver_IngestWaits(t *testing.T) {
	s := &fakeSource{sent: 1, in: IngestState{Full: true}}
	c := &Driver{sources: []Source{s}}
	if c.ingestWaits() {
		t.Fatal("ingestWaits() = true with the reader behind the log's end")
	}
	s.in.ReadToEnd = true
	if !c.ingestWaits() {
		t.Fatal("ingestWaits() = false: full log read to its end, something forwarded since the last trigger")
	}
	c.trigActivity = c.activity()
	if !c.ingestWaits() {
		t.Fatal("ingestWaits() = false: nothing forwarded, but the last checkpoint completed before the log filled")
	}
	c.fullAtDone = true
	if c.ingestWaits() {
		t.Fatal("ingestWaits() = true: nothing forwarded and the last checkpoint completed with the log full")
	}
}
