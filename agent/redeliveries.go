package agent

import (
	"log/slog"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/operators/io/ingest"
)

// redeliveryCounts are the dedup filter's verdicts on a batch other than
// plain new data.
type redeliveryCounts struct {
	redelivered int // DUP, equal to a logged entry: dropped
	resent      int // without DUP, the broker's re-send of the unacked tail: dropped
	keyed       int // dedup_key repeated within its window: dropped
	unmatched   int // DUP, equal to nothing indexed: kept
	// For unmatched ones: the log's first offset and the index's extent
	// when they were found.
	logFirst uint64
	index    ingest.DedupStats
}

func (c *redeliveryCounts) add(v ingest.Verdict) {
	switch v {
	case ingest.DropRedelivery:
		c.redelivered++
	case ingest.DropResend:
		c.resent++
	case ingest.DropKey:
		c.keyed++
	case ingest.KeepUnmatched:
		c.unmatched++
	}
}

func (c *redeliveryCounts) dropped() int { return c.redelivered + c.resent + c.keyed }

func (c *redeliveryCounts) plus(o *redeliveryCounts) {
	c.redelivered += o.redelivered
	c.resent += o.resent
	c.keyed += o.keyed
	if o.unmatched > 0 {
		c.unmatched += o.unmatched
		c.logFirst, c.index = o.logFirst, o.index
	}
}

// burstQuiet ends a burst of redeliveries: its log lines are written once
// none came for that long (or when the intake stops). A broker re-sends a
// block after each reconnect, over many batches: one line per burst says
// how many, where a line per batch or per message would flood the log.
const burstQuiet = 2 * time.Second

// redeliveries counts a source's redeliveries in its metrics as each batch
// is appended, and logs each burst of them once.
type redeliveries struct {
	logger    *slog.Logger
	source    string
	dropped   *metrics.Counter // eddy_ingest_redeliveries_dropped_total; nil: not exported
	unmatched *metrics.Counter // eddy_ingest_redeliveries_unmatched_total; nil: not exported

	mu    sync.Mutex
	burst redeliveryCounts
	timer *time.Timer
}

// record adds an appended batch's counts.
func (r *redeliveries) record(c *redeliveryCounts) {
	if c.dropped() == 0 && c.unmatched == 0 {
		return
	}
	if r.dropped != nil && c.dropped() > 0 {
		r.dropped.Add(c.dropped())
	}
	if r.unmatched != nil && c.unmatched > 0 {
		r.unmatched.Add(c.unmatched)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.burst.plus(c)
	if r.timer == nil {
		r.timer = time.AfterFunc(burstQuiet, r.flush)
	} else {
		r.timer.Reset(burstQuiet)
	}
}

// flush logs the burst so far, if any: the drops as information, the
// unmatched DUP messages as a warning, as they may count twice.
func (r *redeliveries) flush() {
	r.mu.Lock()
	b := r.burst
	r.burst = redeliveryCounts{}
	r.mu.Unlock()
	if r.logger == nil {
		return
	}
	if n := b.dropped(); n > 0 {
		r.logger.Info("ingest: dropped messages the log already holds (the broker's redeliveries, acked again)", "source", r.source,
			"dropped", n, "dup", b.redelivered, "resent_without_dup", b.resent, "dedup_key", b.keyed)
	}
	if b.unmatched > 0 {
		r.logger.Warn("ingest: kept messages the broker marked redelivered (DUP) that match nothing in the log: "+
			"they may never have been logged, or their originals are older than what the log or its index holds",
			"source", r.source, "kept", b.unmatched, "log_first_offset", b.logFirst, "index_first_offset", b.index.IndexFirst,
			"index_covers_log", b.index.Indexed == 0 || b.index.IndexFirst <= b.logFirst)
	}
}

// stop logs what the current burst holds, at once.
func (r *redeliveries) stop() {
	r.mu.Lock()
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
	r.flush()
}
