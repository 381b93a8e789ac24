package watermark

import (
	"errors"
	"fmt"
)

// ErrBadCombiner is returned by NewCombiner for an invalid configuration.
var ErrBadCombiner = errors.New("watermark: bad combiner configuration")

// Combiner merges the watermarks of several inputs into one (docs/architecture.md
// "Semantics"; Flink's StatusWatermarkValve):
//
//   - The combined watermark is the minimum over the active inputs.
//   - An input that delivered nothing (no reading, no watermark) for at least
//     idleTimeoutMs of the caller's monotonic clock is idle: it is left out of
//     the minimum until it speaks again. If every input is idle, the combined
//     watermark does not advance.
//   - The combined watermark never goes back. An input that rejoins with a
//     watermark below the combined value is held at the combined value: it
//     takes part in the minimum with that value, so it stops further progress
//     until its own watermark passes it, without moving the output back.
//   - Broadcast or control inputs must not be registered here: they never
//     hold the watermark back.
//
// Before any input speaks, the combined watermark is Min. Not safe for
// concurrent use.
type Combiner struct {
	inputs      []input
	idleTimeout int64
	combined    int64
}

type input struct {
	wm         int64
	lastActive int64
}

// NewCombiner returns a combiner of n ≥ 1 inputs. idleTimeoutMs ≤ 0 turns
// idleness off: every input then holds the watermark until it speaks. nowMs
// (monotonic) starts every input's idle clock, so an input that never speaks
// becomes idle after idleTimeoutMs.
func NewCombiner(n int, idleTimeoutMs, nowMs int64) (*Combiner, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: %d inputs", ErrBadCombiner, n)
	}
	c := &Combiner{inputs: make([]input, n), idleTimeout: idleTimeoutMs, combined: Min}
	for i := range c.inputs {
		c.inputs[i] = input{wm: Min, lastActive: nowMs}
	}
	return c, nil
}

// Update records that input i spoke at monotonic time nowMs (delivered a
// reading or a watermark) and that its own watermark is now wm (a value
// below its previous one is ignored). It returns the combined watermark.
func (c *Combiner) Update(i int, wm, nowMs int64) int64 {
	in := &c.inputs[i]
	if wm > in.wm {
		in.wm = wm
	}
	in.lastActive = nowMs
	return c.Tick(nowMs)
}

// Tick re-evaluates idleness at monotonic time nowMs and returns the
// combined watermark. Call it periodically: an input going idle can release
// the watermark without any input speaking.
func (c *Combiner) Tick(nowMs int64) int64 {
	min, active := Max, false
	for i := range c.inputs {
		in := &c.inputs[i]
		if c.idle(in, nowMs) {
			continue
		}
		active = true
		w := in.wm
		if w < c.combined {
			w = c.combined // a rejoining input never moves the output back
		}
		if w < min {
			min = w
		}
	}
	if active && min > c.combined {
		c.combined = min
	}
	return c.combined
}

// Current returns the combined watermark as of the last Update or Tick.
func (c *Combiner) Current() int64 { return c.combined }

// Idle reports whether input i counts as idle at monotonic time nowMs.
func (c *Combiner) Idle(i int, nowMs int64) bool { return c.idle(&c.inputs[i], nowMs) }

func (c *Combiner) idle(in *input, nowMs int64) bool {
	return c.idleTimeout > 0 && nowMs-in.lastActive >= c.idleTimeout
}
