package window

import (
	"fmt"

	"github.com/eddy-edge/eddy/window/aggregate"
)

// AggFunc is an aggregate function (see package aggregate).
type AggFunc = aggregate.Func

// AggSpec is one aggregate of a window.
type AggSpec struct {
	Func AggFunc
	// Arg is the index into Element.Values of the aggregate's argument; −1
	// for count() of readings (Count with Arg ≥ 0 counts non-null values).
	Arg int
	// Q is the quantile of Percentile, in [0, 1]; ignored otherwise.
	Q float64
}

// Spec configures an Operator.
type Spec struct {
	// Assigner says which windows a reading belongs to: Tumbling, Sliding,
	// Session, CountTumbling, CountSliding or Global.
	Assigner Assigner
	// AllowedLateness in ms (≥ 0) keeps an event-time window's state until
	// the watermark reaches End−1+AllowedLateness; readings arriving after
	// the final firing but within it re-fire the window as LateUpdate.
	// Ignored by processing-time and count windows. Default 0.
	AllowedLateness int64
	// EarlyEvery in ms of processing time (≥ 0) fires every open window
	// (Kind Early) at processing times that are multiples of EarlyEvery,
	// until its final firing. 0 turns early firings off.
	EarlyEvery int64
	// TriggerCount (≥ 0) fires a window (Kind Early, or LateUpdate once the
	// window is past its end) every TriggerCount readings it receives, in
	// addition to its normal firing. 0 turns it off.
	TriggerCount int64
	// Aggs are the aggregates computed per (key, window), in output order.
	Aggs []AggSpec
}

// Check reports what NewOperator would refuse in s.
func (s Spec) Check() error { return s.validate() }

func (s *Spec) validate() error {
	if err := s.Assigner.validate(); err != nil {
		return err
	}
	if s.AllowedLateness < 0 || s.EarlyEvery < 0 || s.TriggerCount < 0 {
		return fmt.Errorf("%w: negative allowed lateness, early interval or trigger count", ErrBadSpec)
	}
	if len(s.Aggs) == 0 {
		return fmt.Errorf("%w: no aggregates", ErrBadSpec)
	}
	for i, a := range s.Aggs {
		switch {
		case !a.Func.Valid():
			return fmt.Errorf("%w: aggregate %d: invalid function", ErrBadSpec, i)
		case a.Arg < -1 || (a.Arg == -1 && a.Func != aggregate.Count):
			return fmt.Errorf("%w: aggregate %d (%v): bad argument index %d", ErrBadSpec, i, a.Func, a.Arg)
		case a.Func == aggregate.Percentile && !(a.Q >= 0 && a.Q <= 1):
			return fmt.Errorf("%w: aggregate %d: percentile %v outside [0, 1]", ErrBadSpec, i, a.Q)
		}
	}
	return nil
}
