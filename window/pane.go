package window

// Panes: sliding windows evaluated one slide at a time.
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
// A pane p is stored as the window state of Window p: its Accs hold p's
// readings and SinceFire counts them. Fired of pane p counts the firings of
// W(p) = [p.End−size, p.End), the window ending with p; a pane without
// readings (a "marker") exists only to hold that count for a window that
// fired and lives on within its allowed lateness. The rules:
//   - firing timers form a chain: a pane's first reading registers the
//     earliest window containing it that has not reached its end, and a
//     window's final firing registers the next window (one slide later) if
//     a pane they share has readings. Every window with readings thus fires
//     in turn, and a key whose readings arrive in order has one pending
//     firing timer, not one per window (timers are a set: the two ways of
//     registering a window meet in one timer);
//   - a window's firing merges its panes; its Seq is its last pane's Fired;
//     a window that lives on after firing (allowed lateness) keeps the count
//     in its last pane, created empty if absent, and gets its cleanup timer;
//   - when the watermark cleans W up, W's first pane is deleted (no later
//     window contains it), and W's last pane too if it has no readings.
//
// A key therefore holds about as many panes as the per-window operator holds
// windows ((size+lateness)/slide + 1) but about 1 + lateness/slide timers
// instead of (size+lateness)/slide; each reading touches one pane, and a
// firing reads size/slide of them.
//
// Processing-time windows work alike, without lateness: a reading stamped
// at or before the current processing time counts as the next millisecond
// (Process), so it never reaches a pane of a window that has fired.
// Triggers that count or time each window (TriggerCount, EarlyEvery) keep
// the per-window operator.

// UsesPanes reports whether an operator with spec keeps its state in panes
// (a layout of its own: a checkpoint of one layout cannot be read as the
// other).
func UsesPanes(spec Spec) bool { return paneCount(spec) > 0 }

// paneCount returns size/slide for a spec the paned operator evaluates, or 0.
func paneCount(spec Spec) int64 {
	a := spec.Assigner
	if a.kind != kindSliding || a.size <= a.slide || a.size%a.slide != 0 ||
		spec.TriggerCount > 0 || spec.EarlyEvery > 0 {
		return 0
	}
	return a.size / a.slide
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
	if st == nil {
		st = op.store.CreateWindow(p, len(op.funcs))
	}
	op.add(st, e)
	st.SinceFire++
	first := st.SinceFire == 1
	op.store.PutWindow(p, st)
	if first {
		// The earliest of p's windows still to fire; the chain takes the
		// rest.
		for end := p.End; end <= s+size; end += slide {
			if w := (Window{end - size, end}); !op.endPassed(w) {
				op.store.AddTimer(op.assigner.domain, w.MaxTimestamp(), w)
				break
			}
		}
	}
	if op.assigner.domain == EventTime && p.MaxTimestamp() <= op.wm {
		// Windows past their end but within lateness re-fire at once
		// (EventTimeTrigger.onElement), latest start first: the order of
		// AssignWindows, as the per-window operator fires them.
		for end := s + size; end >= p.End; end -= slide {
			if w := (Window{end - size, end}); w.MaxTimestamp() <= op.wm && !op.isWindowLate(w) {
				op.firePaned(e.KeyGroup, e.Key, w, LateUpdate, out)
			}
		}
	}
	return Accepted
}

// endPassed reports whether time has passed w's end, so that it fired (or,
// created by a late reading, never will fire Final). Unlike pastEnd, no
// processing time has passed before AdvanceProcessingTime is first called.
func (op *Operator) endPassed(w Window) bool {
	if op.assigner.domain == ProcessingTime && !op.procSet {
		return false
	}
	return op.pastEnd(w)
}

// firePaned emits a firing of window w of the current key with its panes
// merged, and reports whether a pane of w other than the first has
// readings. A window with no pane (a timer without state) does not fire.
func (op *Operator) firePaned(kg uint16, key []byte, w Window, kind Kind, out *Output) (laterReadings bool) {
	slide := op.assigner.slide
	for i := range op.merge {
		op.merge[i].Reset()
	}
	found := false
	for s := w.Start; s < w.End; s += slide {
		if st := op.store.Window(Window{s, s + slide}); st != nil {
			found = true
			laterReadings = laterReadings || (s > w.Start && st.SinceFire > 0)
			for i := range op.merge {
				op.merge[i].Merge(op.funcs[i], &st.Accs[i])
			}
		}
	}
	if !found {
		return false
	}
	last := Window{w.End - slide, w.End}
	st := op.store.Window(last)
	var seq int64
	if st != nil {
		seq = st.Fired
	}
	f := out.add(kg, key, w, kind, seq, len(op.funcs))
	for i := range op.spec.Aggs {
		f.Values[i] = op.merge[i].Value(op.funcs[i], op.spec.Aggs[i].Q)
	}
	op.stats.Firings++
	cleanup := op.cleanupTime(w)
	if cleanup == w.MaxTimestamp() {
		return laterReadings // purged with this firing: the count is not needed again
	}
	if st == nil {
		st = op.store.CreateWindow(last, len(op.funcs))
	}
	st.Fired = seq + 1
	op.store.PutWindow(last, st)
	op.store.AddTimer(op.assigner.domain, cleanup, w)
	return laterReadings
}

// onPaneTimer is onTimer for a paned operator: every timer is the firing or
// the cleanup timer of a window, in the assigner's domain (when they differ
// the firing timer pops first, so a cleanup has no timer left to delete).
func (op *Operator) onPaneTimer(t Timer, out *Output) {
	op.timerKey = append(op.timerKey[:0], t.Key...)
	key, kg, w := op.timerKey, t.KeyGroup, t.Window
	op.store.SetCurrentKey(kg, key)
	slide := op.assigner.slide
	if t.Time == w.MaxTimestamp() {
		// The next window, if a pane it shares with w has readings; if only
		// its last pane has, that pane's first reading registered it (the
		// next window had not reached its end then, since w had not).
		if op.firePaned(kg, key, w, Final, out) {
			next := Window{w.Start + slide, w.End + slide}
			op.store.AddTimer(op.assigner.domain, next.MaxTimestamp(), next)
		}
	}
	if t.Time == op.cleanupTime(w) {
		op.store.DeleteWindow(Window{w.Start, w.Start + slide})
		last := Window{w.End - slide, w.End}
		if st := op.store.Window(last); st != nil && st.SinceFire == 0 {
			op.store.DeleteWindow(last)
		}
	}
}
