package window

// Panes: sliding event-time windows evaluated one slide at a time.
//
// A sliding window whose slide divides its size is the union of size/slide
// panes [s, s+slide). A paned operator folds a reading into its one pane,
// not into each of its size/slide windows, and merges a window's panes when
// the window fires (Flink SQL's window slicing does the same). Per reading
// it does the work of a tumbling window; per firing it merges size/slide
// panes. The output is the per-window operator's: the same windows fire at
// the same watermarks with the same Kind, Seq and readings, in the same
// order, and count, min, max, first, last and the quantile sketches are
// equal; sums (sum, avg, stddev, variance) are added pane by pane, so they
// may differ from a reading-by-reading sum in the last bits.
//
// A pane p is stored as the window state of Window p. Its Accs hold p's
// readings, SinceFire counts them (0: a "marker" pane without readings), and
// Fired counts the firings of the window ending with p, W(p) = [p.End−size,
// p.End). The rules keep every window that has readings and is not late
// with its last pane (its firing count) and its timers:
//   - creating a pane registers W(p)'s timers, unless W(p) is late;
//   - a pane's first reading creates the missing last panes of every
//     window containing p that is not late;
//   - when the watermark cleans W up, W's first pane is deleted (no later
//     window contains it), and W's last pane too if it has no readings.
//
// Triggers that count or time each window (TriggerCount, EarlyEvery) and
// processing time keep the per-window operator.

// paneCount returns size/slide for a spec the paned operator evaluates, or 0.
func paneCount(spec Spec) int64 {
	a := spec.Assigner
	if a.kind != kindSliding || a.domain != EventTime || a.size <= a.slide || a.size%a.slide != 0 ||
		spec.TriggerCount > 0 || spec.EarlyEvery > 0 {
		return 0
	}
	return a.size / a.slide
}

// paneWindow returns W(p), the window that ends with pane p.
func (op *Operator) paneWindow(p Window) Window {
	return Window{p.End - op.assigner.size, p.End}
}

// processPaned is processTime for a paned operator.
func (op *Operator) processPaned(e *Element, out *Output) Verdict {
	size, slide := op.assigner.size, op.assigner.slide
	s := StartOf(e.Time, op.assigner.off, slide)
	p := Window{s, s + slide}
	// p's windows end at p.End, p.End+slide, …, s+size: if the last is late,
	// so is every one.
	if op.isWindowLate(Window{s, s + size}) {
		return Late
	}
	st := op.store.Window(p)
	created := st == nil
	if created {
		st = op.store.CreateWindow(p, len(op.funcs))
	}
	op.add(st, e)
	st.SinceFire++
	first := st.SinceFire == 1
	op.store.PutWindow(p, st)
	if created {
		op.newPane(p)
	}
	if first {
		for q := (Window{p.Start + slide, p.End + slide}); q.Start <= s+size-slide; q = (Window{q.Start + slide, q.End + slide}) {
			if !op.isWindowLate(op.paneWindow(q)) && op.store.Window(q) == nil {
				op.store.CreateWindow(q, len(op.funcs))
				op.newPane(q)
			}
		}
	}
	if p.MaxTimestamp() <= op.wm {
		// Windows past their end but within lateness re-fire at once
		// (EventTimeTrigger.onElement), in ascending order.
		for end := p.End; end <= s+size && end-1 <= op.wm; end += slide {
			if w := (Window{end - size, end}); !op.isWindowLate(w) {
				op.firePaned(e.KeyGroup, e.Key, w, LateUpdate, out)
			}
		}
	}
	return Accepted
}

// newPane registers the timers of W(p) for a pane just created, unless
// W(p) is late.
func (op *Operator) newPane(p Window) {
	if w := op.paneWindow(p); !op.isWindowLate(w) {
		op.registerTimers(w, NoTimer)
	}
}

// firePaned emits a firing of window w of the current key with its panes
// merged, and counts it in w's last pane (which exists).
func (op *Operator) firePaned(kg uint16, key []byte, w Window, kind Kind, out *Output) {
	slide := op.assigner.slide
	for i := range op.merge {
		op.merge[i].Reset()
	}
	for s := w.Start; s < w.End; s += slide {
		if st := op.store.Window(Window{s, s + slide}); st != nil {
			for i := range op.merge {
				op.merge[i].Merge(op.funcs[i], &st.Accs[i])
			}
		}
	}
	last := Window{w.End - slide, w.End}
	st := op.store.Window(last)
	f := out.add(kg, key, w, kind, st.Fired, len(op.funcs))
	for i := range op.spec.Aggs {
		f.Values[i] = op.merge[i].Result(op.funcs[i], op.spec.Aggs[i].Q)
	}
	st.Fired++
	op.stats.Firings++
	op.store.PutWindow(last, st)
}

// onPaneTimer is onTimer for a paned operator: every timer is a firing or a
// cleanup timer of a window (the firing timer pops first when they differ,
// so a cleanup has nothing to delete but panes).
func (op *Operator) onPaneTimer(t Timer, out *Output) {
	op.timerKey = append(op.timerKey[:0], t.Key...)
	key, kg, w := op.timerKey, t.KeyGroup, t.Window
	op.store.SetCurrentKey(kg, key)
	slide := op.assigner.slide
	last := Window{w.End - slide, w.End}
	if op.store.Window(last) == nil {
		return // cleaned up already
	}
	if t.Time == w.MaxTimestamp() {
		op.firePaned(kg, key, w, Final, out)
	}
	if t.Time == op.cleanupTime(w) {
		op.store.DeleteWindow(Window{w.Start, w.Start + slide})
		if st := op.store.Window(last); st != nil && st.SinceFire == 0 {
			op.store.DeleteWindow(last)
		}
	}
}
