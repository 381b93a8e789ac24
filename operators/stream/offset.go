package stream

// A record's offset (Batch.Offsets) is the ingest-log offset of the message
// it came from. A message that holds several readings (a Sparkplug payload's
// metrics) gives each of them a reading offset instead: the flag bit, the
// message offset and the reading's index in the message. The keyed stage
// buffers readings by (time, offset, key), so without the index two
// readings of one key and time in one message would be one entry. A
// reading offset orders after the message offsets of earlier messages and
// in message order among its own readings, as a replay sees them, and
// decodes to its message's offset with MessageOffset wherever an offset is
// shown.
const (
	readingFlag     = 1 << 63
	readingIndexBit = 16
	// MaxReadingsPerMessage bounds the readings one message may carry.
	MaxReadingsPerMessage = 1 << readingIndexBit
	maxMessageOffset      = 1<<(63-readingIndexBit) - 1
)

// ReadingOffset is the offset of reading i (from 0) of the message at
// offset. ok is false when i ≥ MaxReadingsPerMessage, or when offset is
// beyond 2^47−1 (1.4·10^14 messages, centuries at any rate a device sees),
// since the reading then has no offset of its own.
func ReadingOffset(offset uint64, i int) (o uint64, ok bool) {
	if i < 0 || i >= MaxReadingsPerMessage || offset > maxMessageOffset {
		return 0, false
	}
	return readingFlag | offset<<readingIndexBit | uint64(i), true
}

// MessageOffset is the offset of the message a record offset belongs to.
func MessageOffset(o uint64) uint64 {
	if o&readingFlag == 0 {
		return o
	}
	return o &^ readingFlag >> readingIndexBit
}
