package agent

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/sink"
	"github.com/eddy-edge/eddy/operators/source"
	"github.com/eddy-edge/eddy/operators/stream"
)

// rawBatch is one batch from a source, shared read-only by every pipeline
// that reads the source. The last pipeline to finish with it acks its
// messages, so a message is acked only once every pipeline has taken it.
type rawBatch struct {
	msgs []source.Message
	refs atomic.Int32
}

func (b *rawBatch) release() {
	if b.refs.Add(-1) == 0 {
		for i := range b.msgs {
			b.msgs[i].Ack()
		}
	}
}

// sourceRunner runs one source and fans its batches out to its pipelines.
type sourceRunner struct {
	name string
	src  source.Source
	outs []chan *rawBatch
	eof  atomic.Bool // the source ended by itself (end of input)
	err  error
}

func (s *sourceRunner) run(ctx context.Context, log *slog.Logger) {
	ch := make(chan []source.Message, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for msgs := range ch {
			rb := &rawBatch{msgs: msgs}
			rb.refs.Store(int32(len(s.outs)))
			for _, o := range s.outs {
				o <- rb // pipelines drain until their input closes: never blocks forever
			}
		}
	}()
	err := s.src.Run(ctx, ch)
	close(ch)
	<-done
	if err != nil && ctx.Err() == nil {
		s.err = err
		log.Error("source stopped", "source", s.name, "err", err)
	} else if ctx.Err() == nil {
		s.eof.Store(true)
	}
	for _, o := range s.outs {
		close(o)
	}
}

// watermarkGenerator is what the prepare stage needs of a watermark
// strategy: observe accepted timestamps, report the current watermark.
type watermarkGenerator interface {
	Observe(ts int64) int64
	Current() int64
}

// punctuatedWatermark is the watermark of a source with punctuation:
// marker messages set it, readings do not move it.
type punctuatedWatermark struct{ wm int64 }

func (w *punctuatedWatermark) Observe(int64) int64 { return w.wm }
func (w *punctuatedWatermark) Current() int64      { return w.wm }
func (w *punctuatedWatermark) mark(wm int64) {
	if wm > w.wm {
		w.wm = wm
	}
}

// pipeline is the running form of one `pipeline` block.
type pipeline struct {
	name      string
	in        chan *rawBatch
	srcEOF    func() bool
	prep      *operators.Preparer
	wm        watermarkGenerator // nil on processing time
	tasks     []*operators.WindowTask
	edges     []*stream.Edge
	stride    int
	eventTime bool
	tickEvery time.Duration

	// ordered: the input is a bounded file, so results are held until it
	// ends and written sorted by (window end, key, firing): a replay gives
	// byte-identical output whatever the parallelism or batching.
	ordered bool
	heldMu  sync.Mutex
	held    []*operators.Delivery

	to         []*sinkRunner
	late       *sinkRunner
	deadLetter *sinkRunner

	m   *pipelineMetrics
	log *slog.Logger
	clk clock

	dlLog rateLimiter
}

// run starts the prepare stage and the window subtasks and returns when all
// input has been processed and handed to the sinks.
func (p *pipeline) run() {
	var wg sync.WaitGroup
	for i := range p.tasks {
		wg.Add(1)
		go func(i int) { defer wg.Done(); p.runSubtask(i) }(i)
	}
	p.runPrepare()
	wg.Wait()
	if p.ordered {
		if d := sortedDelivery(p.held); d != nil {
			p.m.out.Add(d.Len())
			for _, s := range p.to {
				s.in <- d
			}
		}
		for _, s := range p.to {
			for range p.tasks {
				s.producers.Done()
			}
		}
	}
}

// sortedDelivery merges held deliveries into one, sorted by window end,
// then key, then firing.
func sortedDelivery(held []*operators.Delivery) *operators.Delivery {
	var items []sink.Item
	for _, d := range held {
		items = append(items, d.Items()...)
	}
	if len(items) == 0 {
		return nil
	}
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i].Result, items[j].Result
		if a == nil || b == nil {
			return a != nil && b == nil
		}
		if a.End != b.End {
			return a.End < b.End
		}
		if c := bytes.Compare(a.Key, b.Key); c != 0 {
			return c < 0
		}
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		return a.Firing < b.Firing
	})
	out := new(operators.Delivery)
	for _, it := range items {
		if it.Result != nil {
			out.AddEncoded(it.Payload, it.Result)
		} else {
			out.AddRaw(it.Payload)
		}
	}
	return out
}

func (p *pipeline) runPrepare() {
	ctx := context.Background() // internal edges drain on shutdown; only sources are cancelled
	batches := make([]*stream.Batch, len(p.edges))
	lastWM := int64(math.MinInt64)
	broadcast := func() {
		if p.wm == nil {
			return
		}
		if wm := p.wm.Current(); wm > lastWM {
			lastWM = wm
			p.m.watermark.Store(wm)
			for _, e := range p.edges {
				_ = e.Send(ctx, stream.Message{Kind: stream.Watermark, Watermark: wm})
			}
		}
	}
	inputs, _ := p.wm.(*inputWatermarks)
	var idleTick <-chan time.Time
	if inputs != nil {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		idleTick = tk.C
	}
	var dead *operators.Delivery
	for {
		var (
			rb *rawBatch
			ok bool
		)
		select {
		case rb, ok = <-p.in:
		case <-idleTick:
			inputs.tick(p.clk.monoMs())
			broadcast()
			continue
		}
		if !ok {
			break
		}
		now, wall := p.clk.monoMs(), p.clk.wallMs()
		var passed, filtered, rejected int64
		for i := range rb.msgs {
			m := &rb.msgs[i]
			switch p.prep.Prepare(m.Payload, m.Topic, m.Offset, now, wall) {
			case operators.Pass:
				if inputs != nil {
					inputs.route(m.Topic, now)
				}
				s := p.prep.Subtask
				if batches[s] == nil {
					batches[s] = stream.NewBatch(p.stride)
				}
				if p.wm != nil {
					batches[s].AppendWatermarked(p.prep.Key, p.prep.KeyGroup, p.prep.Time, p.prep.Values, m.Payload, m.Offset, p.wm.Current())
					p.wm.Observe(p.prep.Time)
				} else {
					batches[s].Append(p.prep.Key, p.prep.KeyGroup, p.prep.Time, p.prep.Values, m.Payload, m.Offset)
				}
				passed++
			case operators.Punctuation:
				if pw, ok := p.wm.(*punctuatedWatermark); ok {
					pw.mark(p.prep.Watermark)
				}
			case operators.Filtered:
				filtered++
			case operators.Rejected:
				rejected++
				r := p.prep.Reject
				p.m.deadLettered(r.Reason).Inc()
				if p.dlLog.allow(wall) {
					p.log.Warn("reading dead-lettered", "pipeline", p.name, "reason", r.Reason, "detail", r.Detail, "topic", m.Topic, "offset", m.Offset)
				}
				if p.deadLetter != nil {
					if dead == nil {
						dead = new(operators.Delivery)
					}
					dead.AddDeadLetter(p.name, r.Reason, r.Detail, m.Topic, m.Offset, m.Payload)
				}
			}
		}
		p.m.in.Add(len(rb.msgs))
		p.m.filtered.Add(int(filtered))
		for s, b := range batches {
			if b != nil {
				_ = p.edges[s].Send(ctx, stream.Message{Kind: stream.Records, Batch: b})
				batches[s] = nil
			}
		}
		rb.release()
		if dead != nil {
			p.deadLetter.in <- dead
			dead = nil
		}
		broadcast()
	}
	if p.srcEOF() {
		for _, e := range p.edges {
			_ = e.Send(ctx, stream.Message{Kind: stream.EndOfInput})
		}
	}
	for _, e := range p.edges {
		e.Close()
	}
	if p.deadLetter != nil {
		p.deadLetter.producers.Done()
	}
}

func (p *pipeline) runSubtask(i int) {
	t, e := p.tasks[i], p.edges[i]
	var tick <-chan time.Time
	if !p.eventTime || p.tickEvery > 0 {
		tk := time.NewTicker(p.tickEvery)
		defer tk.Stop()
		tick = tk.C
	}
	keepLate := p.late != nil
	var lastLate, lastUnassigned int64
	for {
		var (
			m  stream.Message
			ok = true
		)
		select {
		case m = <-e.Priority():
		default:
			select {
			case m = <-e.Priority():
			case m, ok = <-e.C():
			case <-tick:
				t.AdvanceProcessingTime(p.clk.monoMs())
				p.emit(t)
				continue
			}
		}
		if !ok {
			break
		}
		switch m.Kind {
		case stream.Records:
			t.Process(m.Batch, keepLate)
			m.Batch.Release()
		case stream.Watermark:
			t.AdvanceWatermark(m.Watermark)
		case stream.EndOfInput:
			// A finished input flushes every window, event time and
			// processing time alike.
			t.AdvanceWatermark(math.MaxInt64)
			t.AdvanceProcessingTime(math.MaxInt64)
		}
		p.emit(t)
		if d := t.Late - lastLate; d > 0 {
			p.m.late.Add(int(d))
			lastLate = t.Late
		}
		if d := t.Unassigned - lastUnassigned; d > 0 {
			p.m.unassigned.Add(int(d))
			lastUnassigned = t.Unassigned
		}
	}
	if !p.ordered {
		for _, s := range p.to {
			s.producers.Done()
		}
	}
	if p.late != nil {
		p.late.producers.Done()
	}
}

// emit hands the subtask's collected output to the sinks.
func (p *pipeline) emit(t *operators.WindowTask) {
	if d := t.TakeResults(); d != nil {
		if p.ordered {
			p.heldMu.Lock()
			p.held = append(p.held, d)
			p.heldMu.Unlock()
			return
		}
		p.m.out.Add(d.Len())
		for _, s := range p.to {
			s.in <- d
		}
	}
	if d := t.TakeLate(); d != nil && p.late != nil {
		p.late.in <- d
	}
}

// rateLimiter lets a few log lines per minute through.
type rateLimiter struct {
	windowStart int64
	n           int
}

func (r *rateLimiter) allow(nowMs int64) bool {
	const perMinute = 5
	if nowMs-r.windowStart >= 60_000 {
		r.windowStart, r.n = nowMs, 0
	}
	r.n++
	return r.n <= perMinute
}
