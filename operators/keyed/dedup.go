package keyed

import "fmt"

// Dedup passes the first reading of each id and drops its repeats within
// Within: a reading passes when no reading of the same id (and key) passed
// less than Within before it. The host keeps one DedupEntry per (key, id)
// in a MapState keyed by the evaluated id, so the block sees one entry, not
// the map.
//
// The entry's time is written when a reading passes and only then: a
// dropped repeat does not extend the window (Flink's StateTtlConfig
// UpdateType.OnCreateAndWrite). So an id repeated every minute with Within
// one hour passes once per hour, not once ever.
//
// The rule is the state layer's TTL: a MapState with TTLConfig{TTL:
// Within, Update: OnCreateAndWrite, Visibility: NeverReturnExpired} whose
// clock (KeyedOptions.Now) reads the block's domain at each reading returns
// no entry once Seen + Within ≤ now, exactly when OnReading would let the
// reading pass, so the state's TTL is the entries' cleanup. A state clock
// of another domain must not expire an entry before its Expiry in the
// block's domain.
//
// EventTimeDomain is the default the host should apply: a repeat of a
// message carries the message's time, so it is caught however late the
// broker or the device redelivers it, and a replay after a restore passes
// and drops the same readings. ProcessingTimeDomain drops repeats that
// arrive within Within of the first copy's arrival.
//
// Out of order (order = "arrival", event time): an id passes when it is at
// least Within away from the latest passed time on either side, so an old
// copy arriving after a newer one is dropped if it is less than Within
// older; Seen only moves forward.
//
// The entry is 9 bytes per (key, id) (DedupCodec), plus the id as the map
// key.
type Dedup struct {
	// WithinMs is how long repeats are dropped after a reading passes, in
	// ms; > 0. The config's within.
	WithinMs int64
	// Time is the domain of Seen; the host's default is EventTimeDomain.
	Time TimeDomain
}

// Validate returns an error wrapping ErrBadBlock if an option is out of
// range.
func (d Dedup) Validate() error {
	if d.WithinMs <= 0 {
		return fmt.Errorf("%w: dedup within %dms must be > 0", ErrBadBlock, d.WithinMs)
	}
	return d.Time.check("dedup")
}

// DedupEntry is the state of one (key, id): when it last passed.
type DedupEntry struct {
	Seen int64 // in the block's domain
}

// OnReading decides whether a reading with an id whose entry is e (found:
// the MapState held one) passes. When it passes it sets e.Seen and the host
// must write e back (creating or overwriting the entry, which restarts its
// TTL); when it is dropped e is unchanged and nothing is written.
func (d Dedup) OnReading(e *DedupEntry, found bool, at At) (pass bool) {
	t := at.in(d.Time)
	if found && t < addSat(e.Seen, d.WithinMs) && e.Seen < addSat(t, d.WithinMs) {
		return false
	}
	if !found || t > e.Seen {
		e.Seen = t
	}
	return true
}

// Expiry returns the time from which e no longer drops repeats, Seen +
// Within (saturated), in the block's domain: the host may remove the entry
// then.
func (d Dedup) Expiry(e DedupEntry) int64 { return addSat(e.Seen, d.WithinMs) }

// DedupCodec encodes a DedupEntry in 9 bytes (the shape of state.Codec):
//
//	version:1 seen:i64le
type DedupCodec struct{}

const dedupSize = 9

// Append appends the encoding of e to dst.
func (DedupCodec) Append(dst []byte, e DedupEntry) []byte {
	return appendI64(append(dst, stateVersion), e.Seen)
}

// Decode decodes one encoding written by Append; anything else is an error
// wrapping ErrCorruptState.
func (DedupCodec) Decode(src []byte) (DedupEntry, error) {
	if err := checkEncoding(src, "dedup entry", dedupSize); err != nil {
		return DedupEntry{}, err
	}
	return DedupEntry{Seen: readI64(src[1:])}, nil
}
