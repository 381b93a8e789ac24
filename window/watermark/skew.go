package watermark

// TooFarInFuture reports whether a reading stamped ts (ms) lies more than
// skewMs ahead of the device's clock deviceNowMs (docs/architecture.md "Time and windows":
// max_future_skew). Such a reading must be dead-lettered with that reason and
// must not reach a generator or the window operator. skewMs ≤ 0 disables the
// check (always false). Readings exactly skewMs ahead are accepted.
func TooFarInFuture(ts, deviceNowMs, skewMs int64) bool {
	if skewMs <= 0 {
		return false
	}
	if deviceNowMs > Max-skewMs {
		return false // the limit is beyond every timestamp
	}
	return ts > deviceNowMs+skewMs
}
