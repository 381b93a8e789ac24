package config

import "github.com/hashicorp/hcl/v2"

// DefaultMaxMessageSize is max_message_size's default, in bytes.
const DefaultMaxMessageSize = 256 << 10

// IngestSegmentBytes is the size of an ingest log segment for a max_disk of
// maxDisk: a quarter of the budget, so truncation can always free one, and
// at most 64 MiB.
func IngestSegmentBytes(maxDisk int64) int64 { return min(int64(64<<20), maxDisk/4) }

// ingestEntryOverhead is what an ingest log entry holds besides the
// payload, at most: a topic of up to 65535 bytes, MQTT 5 properties of up
// to source.MaxProps bytes, and the frame's own header and records.
const ingestEntryOverhead = 64<<10 + 4<<10 + 1<<10

// MaxMessageSizeLimit is the largest max_message_size the ingest log with
// this max_disk can store: a message must fit one segment.
func MaxMessageSizeLimit(maxDisk int64) int64 {
	return IngestSegmentBytes(maxDisk) - ingestEntryOverhead
}

// messageSize reads max_message_size: the value and where it was set, or 0
// and nil when unset (checkMessageSizes fills the default).
func (a attrs) messageSize() (int64, *hcl.Range) {
	if !a.has("max_message_size") {
		return 0, nil
	}
	r := a.rangeOf("max_message_size")
	n := a.size("max_message_size", DefaultMaxMessageSize)
	if n < 1 {
		a.d.errorf(r, "Value out of range", "\"max_message_size\" must be at least 1 byte, e.g. \"256KiB\".")
	}
	return n, &r
}

// checkMessageSizes holds every max_message_size to what the ingest log
// can store, and fills the defaults: DefaultMaxMessageSize, or the limit
// when the segment is smaller.
func (d *decoder) checkMessageSizes(cfg *Config) {
	limit := MaxMessageSizeLimit(cfg.Ingest.MaxDiskBytes)
	check := func(n *int64, at *hcl.Range) {
		switch {
		case at == nil:
			*n = min(DefaultMaxMessageSize, limit)
		case *n > limit:
			d.errorf(*at, "Message size beyond the ingest log",
				"max_message_size %d bytes does not fit an ingest segment (a quarter of ingest { max_disk }, at most 64MiB, less 65KiB for the topic): at most %d bytes here; lower it or raise ingest { max_disk }.",
				*n, limit)
		}
	}
	if b := cfg.Broker; b != nil {
		check(&b.MaxMessageSize, b.maxMessageSizeAt)
	}
	for _, s := range cfg.Sources {
		if s.MQTT != nil {
			check(&s.MQTT.MaxMessageSize, s.MQTT.maxMessageSizeAt)
		}
	}
}
