package stages

import (
	"fmt"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/io/source"
	"github.com/eddy-edge/eddy/operators/io/sparkplug"
	"github.com/eddy-edge/eddy/operators/stream"
)

// A source with format sparkplug_b is read by a sparkplug.Reader in the
// prepare stage, after the ingest log: a restore replays the log from the
// checkpoint's offset, so the Reader's state (sessions, aliases, last
// values) goes into the same checkpoint, taken as the barrier passes the
// prepare stage, and comes back with it. Each reading of a message enters
// the pipeline as a JSON object (sparkplug.AppendReadingJSON), so that the
// expressions, keyed subtasks, late output and dead letters read it as any
// JSON reading.

// sparkplugIn is a pipeline's Sparkplug reader and the message it reads.
type sparkplugIn struct {
	r    *sparkplug.Reader
	emit func(*sparkplug.Reading) // l.onSparkplugReading, bound once
	buf  []byte                   // the current reading's JSON
	// rebirth asks a node for its births (request_rebirth); nil: never.
	rebirth func(group, node string)

	// The message being read, for emit.
	m                     *source.Message
	now, wall             int64
	synced                bool
	readings, filteredRds int64
}

// RebirthFunc asks the edge node group/node for its births again (an NCMD
// "Node Control/Rebirth"), after a message of it could not be read. It
// must not block the prepare stage.
type RebirthFunc func(group, node string)

// sparkplugExtraKey names a pipeline's Sparkplug reader state in a
// checkpoint.
func sparkplugExtraKey(pipeline string) string { return "sparkplug/" + pipeline }

// newSparkplugIn returns the reader of a sparkplug_b pipeline, nil for
// other formats.
func newSparkplugIn(format string, rebirth RebirthFunc) *sparkplugIn {
	if format != config.FormatSparkplugB {
		return nil
	}
	return &sparkplugIn{r: sparkplug.NewReader(), rebirth: rebirth}
}

// sparkplugSnapshot is the reader's state for barrier; nil without one.
func (p *Pipeline) sparkplugSnapshot() []byte {
	if p.sp == nil {
		return nil
	}
	return p.sp.r.AppendSnapshot(nil)
}

// restoreSparkplug puts the reader's state of checkpoint m back; a
// checkpoint without one (taken before the pipeline read Sparkplug) leaves
// it empty, and the nodes' next births fill it.
func (p *Pipeline) restoreSparkplug(m *checkpoint.Manifest) error {
	b, ok := m.Extra[sparkplugExtraKey(p.name)]
	if !ok || p.sp == nil {
		return nil
	}
	if err := p.sp.r.Restore(b); err != nil {
		return fmt.Errorf("agent: checkpoint %d: pipeline %q: %w", m.ID, p.name, err)
	}
	return nil
}

// sparkplugMessage reads one Sparkplug message: each reading goes through
// the preparer; a message the reader refuses is dead-lettered whole, with
// the reader's reason, and may ask its node for a rebirth. It returns how
// many readings it counts in and how many the filter dropped.
func (l *prepareLoop) sparkplugMessage(m *source.Message, now, wall int64, synced bool) (in, filtered int64) {
	sp := l.p.sp
	if sp.emit == nil {
		sp.emit = l.onSparkplugReading
	}
	sp.m, sp.now, sp.wall, sp.synced = m, now, wall, synced
	sp.readings, sp.filteredRds = 0, 0
	reason, detail := sp.r.Message(m.Topic, m.Payload, sp.emit)
	sp.m = nil
	if reason == "" {
		return sp.readings, sp.filteredRds
	}
	l.p.prep.Reject = operators.Reject{Reason: reason, Detail: detail}
	l.reject(m, m.Payload, wall)
	if sp.rebirth != nil {
		switch reason {
		case sparkplug.ReasonBeforeBirth, sparkplug.ReasonSeqGap, sparkplug.ReasonUnknownAlias:
			if t, err := sparkplug.ParseTopic(m.Topic); err == nil {
				sp.rebirth(t.Group, t.Node)
			}
		}
	}
	return 1, 0
}

// onSparkplugReading prepares one reading of the message being read.
func (l *prepareLoop) onSparkplugReading(rd *sparkplug.Reading) {
	p, sp := l.p, l.p.sp
	sp.readings++
	sp.buf = sparkplug.AppendReadingJSON(sp.buf[:0], rd)
	m := sp.m
	// Each reading has an offset of its own, so that a keyed pipeline does
	// not hold two readings of one key and time in this message as one.
	offset, ok := stream.ReadingOffset(m.Offset, int(sp.readings-1))
	if !ok {
		p.prep.Reject = operators.Reject{Reason: ReasonTooManyReadings,
			Detail: fmt.Sprintf("a message holds at most %d readings", stream.MaxReadingsPerMessage)}
		l.reject(m, sp.buf, sp.wall)
		return
	}
	if l.outcome(p.prep.Prepare(sp.buf, m.Topic, m.Offset, m.Arrival, sp.wall, sp.synced), m, offset, sp.buf, sp.now, sp.wall) {
		sp.filteredRds++
	}
}

// ReasonTooManyReadings dead-letters the readings of a Sparkplug message
// past stream.MaxReadingsPerMessage.
const ReasonTooManyReadings = "too_many_readings"
