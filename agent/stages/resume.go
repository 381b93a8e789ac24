package stages

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/window/watermark"
)

// After the broker resumes a source's session, the messages it stored while
// the agent was away may come behind newer ones (aedes sends them after the
// live traffic of the restored subscription). The prepare stage follows each
// resume with a watermark.Resume (logged arrival times, so a replay repeats
// it); readings dropped as late in its episode are counted under their own
// reason and reported in one WARN per burst, at its start (lateBurst); with
// watermark { hold_after_resume } the watermark waits for them instead.

// lateBurstQuiet ends a burst of late readings after a resume: its total
// is logged once no more have been dropped for this long.
const lateBurstQuiet = 2 * time.Second

// lateBurst gathers the late readings of a resume's backlog from every
// subtask of a pipeline: one WARN when the burst starts, so that the log
// says it even when the process is killed during the burst, and one INFO
// with its total when it ends.
type lateBurst struct {
	log      *slog.Logger
	pipeline string
	source   string
	hold     time.Duration // the source's hold_after_resume
	lateOut  bool          // the pipeline has a late_output

	mu    sync.Mutex
	n     int64
	last  time.Time
	timer *time.Timer
}

// add counts n late readings of a resumed session's backlog: the first of
// a burst logs the WARN at once; the total follows lateBurstQuiet after
// the last.
func (b *lateBurst) add(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n += n
	b.last = time.Now()
	if b.timer != nil {
		return
	}
	b.timer = time.AfterFunc(lateBurstQuiet, b.flush)
	where := "dropped (counted)"
	if b.lateOut {
		where = "sent to late_output"
	}
	remedy := "set watermark { hold_after_resume = \"3s\" } on the source to hold the watermark while they arrive"
	if b.hold > 0 {
		remedy = fmt.Sprintf("the backlog paused for longer than hold_after_resume (%s), or outlasted %d times it: raise it", b.hold, watermark.MaxHoldFactor)
	}
	b.log.Warn("readings late after the broker resumed the session: it sent its stored messages after newer ones",
		"pipeline", b.pipeline, "source", b.source, "late", n, "outcome", where, "remedy", remedy)
}

// flush ends the burst once it has been quiet for lateBurstQuiet.
func (b *lateBurst) flush() {
	b.mu.Lock()
	if wait := lateBurstQuiet - time.Since(b.last); wait > 0 {
		b.timer.Reset(wait)
		b.mu.Unlock()
		return
	}
	n := b.n
	b.n, b.timer = 0, nil
	b.mu.Unlock()
	b.log.Info("burst of late readings after the resumed session ended",
		"pipeline", b.pipeline, "source", b.source, "late", n)
}

// holdsAfterResume reports whether the pipeline holds its watermark after a
// resumed session (its prepare stage then ticks to end a hold when readings
// stop coming).
func (p *Pipeline) holdsAfterResume() bool { return p.burst != nil && p.burst.hold > 0 }

// resumeExtraKey names the prepare stage's resume state in a checkpoint.
func resumeExtraKey(pipeline string) string { return "resume/" + pipeline }

// resumeSnapshot encodes the prepare stage's resume state and its
// generator's own (unheld) watermark for barrier; nil before any resume.
func (p *Pipeline) resumeSnapshot() []byte {
	if p.resume == nil || p.resume.Episode() == 0 {
		return nil
	}
	return binary.BigEndian.AppendUint64(p.resume.State().AppendBinary(nil), uint64(p.wm.Current()))
}

// restoreResume puts the resume state of checkpoint m back: a restore in the
// middle of a hold goes on holding, with the generator where it was.
func (p *Pipeline) restoreResume(m *checkpoint.Manifest) error {
	b, ok := m.Extra[resumeExtraKey(p.name)]
	if !ok || p.resume == nil {
		return nil
	}
	if len(b) < 8 {
		return fmt.Errorf("agent: checkpoint %d: pipeline %q: %w", m.ID, p.name, watermark.ErrBadResumeState)
	}
	st, err := watermark.UnmarshalResumeState(b[:len(b)-8])
	if err != nil {
		return fmt.Errorf("agent: checkpoint %d: pipeline %q: %w", m.ID, p.name, err)
	}
	p.resume.Restore(st)
	if gen := int64(binary.BigEndian.Uint64(b[len(b)-8:])); gen != watermark.Min {
		p.restoreGenerator(gen)
	}
	return nil
}
