package walsink

// windowLearner decides the QoS 2 session's in-flight window: how many flows
// may be open at the broker at once. MQTT 3.1.1 announces no limit, and a
// broker over its limit may drop messages after answering PUBREC
// (mosquitto 2.0) or close the connection, so the window is learnt:
//
//   - announced: the broker's Receive Maximum, asked for once per Open on
//     an MQTT 5 connection of its own (probe.go); the window never exceeds
//     it. mosquitto announces its max_inflight_messages so.
//   - a close by the broker while more than one flow was open halves the
//     window (down to 1). Not for a broker that announced its limit: the
//     window already fits it, and its closes are restarts or the network,
//     which a halved window would only slow down after.
//   - a close before any answer at all on that connection, with more than
//     one flow open, sets the window to 1 at once, announced limit or not:
//     the broker may refuse QoS 2 itself, which only a window of one can
//     tell (refusal.go). The first answer on a connection puts the window
//     of a broker that announced its limit back at that limit.
//   - every growEvery flows completed without such a close since the last
//     change add 1, never above max (Options.MaxInflight) nor announced.
//
// It is pure and belongs to the publisher goroutine.
type windowLearner struct {
	max       int // Options.MaxInflight
	announced int // the broker's Receive Maximum; 0: not known
	cur       int
	clean     int // flows completed since the last change
}

// growEvery is how many flows must complete without a close by the broker
// for the window to grow by one after it shrank: slow, since each step
// beyond the broker's limit costs a reconnect.
const growEvery = 1000

func newWindowLearner(maxInflight int) *windowLearner {
	return &windowLearner{max: maxInflight, cur: maxInflight}
}

// limit is the largest window allowed: max, capped by announced.
func (w *windowLearner) limit() int {
	if w.announced > 0 {
		return min(w.max, w.announced)
	}
	return w.max
}

// announce records the broker's Receive Maximum (0: none) and reports
// whether the window changed.
func (w *windowLearner) announce(n int) bool {
	w.announced = n
	prev := w.cur
	w.cur = min(w.cur, w.limit())
	return w.cur != prev
}

// closed records a close by the broker with open flows open, after
// answered PUBRECs, PUBCOMPs (or PUBACKs) on that connection, and reports
// whether the window changed.
func (w *windowLearner) closed(open, answered int) bool {
	if open <= 1 || w.cur == 1 {
		return false
	}
	prev := w.cur
	switch {
	case answered == 0:
		w.cur = 1
	case w.announced > 0:
		return false
	default:
		w.cur = max(1, w.cur/2)
	}
	w.clean = 0
	return w.cur != prev
}

// firstAnswer records the first PUBREC, PUBCOMP or PUBACK on a connection
// and reports whether the window changed: a broker that announced its
// limit and answers gets its whole window back.
func (w *windowLearner) firstAnswer() bool {
	if w.announced == 0 || w.cur >= w.limit() {
		return false
	}
	w.cur, w.clean = w.limit(), 0
	return true
}

// completed records n flows completed and reports whether the window grew.
func (w *windowLearner) completed(n int) bool {
	if w.cur >= w.limit() {
		w.clean = 0
		return false
	}
	w.clean += n
	if w.clean < growEvery {
		return false
	}
	w.clean -= growEvery
	w.cur++
	return true
}
