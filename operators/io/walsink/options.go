package walsink

import (
	"crypto/tls"
	"fmt"
	"math"
	"net/url"
	"time"

	"github.com/eddy-edge/eddy/state/vfs"
)

// WhenFull says what Write does when the WAL reaches MaxDiskBytes.
type WhenFull string

const (
	// Block makes Write wait (backpressure) until delivery frees segments or
	// leaves no committed message undelivered, or its context ends, or the
	// sink is closed.
	Block WhenFull = "block"
	// DropOldest drops the oldest committed messages not yet sent, counts
	// them (Stats.Dropped) and logs it.
	DropOldest WhenFull = "drop_oldest"
)

// Options configures a Sink. Zero values take the stated defaults.
type Options struct {
	// Broker is the upstream broker: tcp://host:port, ssl://host:port or
	// tls://host:port (or mqtt://, mqtts://). Required.
	Broker string
	// ClientID is the fixed MQTT client id; the session is persistent
	// (clean session 0), so it must be the same after every restart and
	// unique among the broker's clients. Required.
	ClientID string
	Username string
	Password string
	// TLS configures ssl:// and tls:// brokers; nil uses the system roots.
	TLS *tls.Config
	// KeepAlive is the MQTT keepalive. Default 30s; at least 1s. It is
	// also the ping timeout: the connection is dropped when a PINGREQ is
	// unanswered and nothing at all came from the broker for KeepAlive
	// (see the package doc, Keepalive).
	KeepAlive time.Duration
	// ReconnectMin and ReconnectMax bound the exponential reconnect backoff.
	// Defaults 100ms and 30s.
	ReconnectMin, ReconnectMax time.Duration
	// MaxInflight is the maximum number of open QoS 2 flows (PUBLISH sent,
	// PUBCOMP not yet received). Default 20, mosquitto's default
	// max_inflight_messages. The window in use is learnt and may be
	// smaller: the broker's MQTT 5 Receive Maximum caps it, and closes by
	// the broker with flows open halve it (see the package doc, "Broker
	// settings"), so a value above the broker's limit costs throughput,
	// not results. Raising it (with the broker's limit) raises the
	// delivery rate, which is about the window ÷ round trip.
	MaxInflight int
	// MaxDiskBytes bounds the WAL's segment files. Default 512 MiB. A Write
	// that would pass it applies WhenFull only while the WAL holds committed,
	// undelivered messages (what delivery frees); with none, it is accepted:
	// room could then only come from committing pending epochs, and their
	// checkpoint has to pass the sink first. So the WAL can exceed the bound
	// by the data of the epochs not yet committed.
	MaxDiskBytes int64
	// WhenFull is Block (default) or DropOldest.
	WhenFull WhenFull
	// DrainRate caps publishing in messages per second; 0 is unlimited.
	DrainRate float64
	// Retain sets the retain flag on every message.
	Retain bool
	// SegmentBytes is the target segment size. Default: MaxDiskBytes/16,
	// clamped to 64 KiB..64 MiB. Smaller segments free disk sooner.
	SegmentBytes int64
	// DialTimeout bounds connecting and the CONNACK. Default 10s.
	DialTimeout time.Duration
	// QoS is 2 (default: the zero-duplicate QoS 2 session) or 1, for
	// brokers that refuse QoS 2 (AWS IoT Core, Azure IoT Hub): messages are
	// published at QoS 1 from the WAL, in order, at most MaxInflight
	// unacknowledged; the acknowledged position is recorded per batch of
	// PUBACKs (no fsync of its own), and after a crash or reconnect only
	// the unacknowledged window is published again, byte for byte (so with
	// the same output id). Guarantee: no loss, order per key, repeats only
	// of the unacknowledged in-flight window, each with the same id.
	QoS byte
	// Immediate makes the sink an at-least-once disk buffer: every Write is
	// publishable at once, without waiting for a checkpoint (latency stays
	// low); PreCommit only syncs (what a completed checkpoint produced is
	// then on disk), Commit does nothing, and Recover publishes whatever
	// the WAL holds. Replay after a crash writes the results since the last
	// checkpoint again: they may repeat. MaxDiskBytes, WhenFull and
	// DrainRate apply as in the default mode.
	Immediate bool
	// FS is the file system the WAL lives on. Nil: vfs.Default.
	FS vfs.FS
	// ProtocolVersion is the MQTT version of the session: 5 (default) or
	// 4 (3.1.1). At 5 the sink honours what the broker announces in its
	// CONNACK (Receive Maximum caps the window, Maximum QoS below QoS is
	// named before any publish, a message over the Maximum Packet Size is
	// dead-lettered too_large), reads the reason code of every answer,
	// and publishes each result with its id as the user property "id" and
	// the content type application/json. A broker that refuses MQTT 5 in
	// its CONNACK is spoken to in 3.1.1 for the rest of the run.
	ProtocolVersion byte
	// MessageExpiry, when set, bounds how long a result may wait: one
	// whose wait since its commit (its epoch's checkpoint) passed it is
	// dead-lettered expired, never published; at MQTT 5 the others are
	// published with the Message Expiry Interval left after their wait,
	// so the broker does not deliver them later than that either. 0: no
	// expiry. At most 2^32-1 seconds.
	MessageExpiry time.Duration
	// SessionExpiry is the MQTT 5 Session Expiry Interval of the sink's
	// persistent session: how long the broker keeps it after a
	// disconnect (a device replaced or gone leaves no session behind for
	// ever). 0: never expires (3.1.1's clean session 0). A session that
	// expires during an outage loses the broker's QoS 2 state of open
	// flows (the CONNACK then says session present = 0). At least 1s.
	SessionExpiry time.Duration
	// OnReason, when set, is called by the publisher for every MQTT 5
	// reason code other than success on a PUBACK, PUBREC or PUBCOMP, and
	// for every DISCONNECT from the broker: the packet ("puback",
	// "pubrec", "pubcomp", "disconnect") and the reason's name
	// ("not_authorized", "no_matching_subscribers", …). For metrics.
	OnReason func(packet, reason string)

	// onComplete, for tests and benchmarks, is called by the publisher for
	// every PUBCOMP with the message's seq.
	onComplete func(seq uint64)
	// onWrite and onSync, for benchmarks, are called for every run of
	// complete frames the sink writes to the WAL (segment headers
	// excluded) and every sync of it the sink asks for.
	onWrite func(frames []byte)
	onSync  func()
}

// Check reports what Open would refuse in o, without touching the disk or
// the network, so a caller can report it before starting anything.
func (o Options) Check() error { return o.normalize() }

func (o *Options) normalize() error {
	if o.Broker == "" {
		return fmt.Errorf("walsink: options: broker is required")
	}
	u, err := url.Parse(o.Broker)
	if err != nil {
		return fmt.Errorf("walsink: options: broker: %w", err)
	}
	switch u.Scheme {
	case "tcp", "mqtt", "ssl", "tls", "mqtts":
	default:
		return fmt.Errorf("walsink: options: broker scheme %q (want tcp, ssl or tls)", u.Scheme)
	}
	if o.ClientID == "" {
		return fmt.Errorf("walsink: options: client id is required (a fixed one: the session is persistent)")
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 30 * time.Second
	}
	if o.KeepAlive < time.Second || o.KeepAlive > 65535*time.Second {
		return fmt.Errorf("walsink: options: keepalive %v out of 1s..65535s", o.KeepAlive)
	}
	if o.ReconnectMin <= 0 {
		o.ReconnectMin = 100 * time.Millisecond
	}
	if o.ReconnectMax <= 0 {
		o.ReconnectMax = 30 * time.Second
	}
	o.ReconnectMax = max(o.ReconnectMax, o.ReconnectMin)
	if o.MaxInflight == 0 {
		o.MaxInflight = 20
	}
	if o.MaxInflight < 1 || o.MaxInflight > 65535 {
		return fmt.Errorf("walsink: options: max inflight %d out of 1..65535", o.MaxInflight)
	}
	if o.MaxDiskBytes == 0 {
		o.MaxDiskBytes = 512 << 20
	}
	if o.MaxDiskBytes < 0 {
		return fmt.Errorf("walsink: options: max disk %d < 0", o.MaxDiskBytes)
	}
	switch o.WhenFull {
	case "":
		o.WhenFull = Block
	case Block, DropOldest:
	default:
		return fmt.Errorf("walsink: options: when_full %q (want %q or %q)", o.WhenFull, Block, DropOldest)
	}
	if o.DrainRate < 0 {
		return fmt.Errorf("walsink: options: drain rate %v < 0", o.DrainRate)
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = min(max(o.MaxDiskBytes/16, 64<<10), 64<<20)
	}
	switch o.QoS {
	case 0:
		o.QoS = 2
	case 1, 2:
	default:
		return fmt.Errorf("walsink: options: qos %d (want 1 or 2)", o.QoS)
	}
	switch o.ProtocolVersion {
	case 0:
		o.ProtocolVersion = 5
	case 4, 5:
	default:
		return fmt.Errorf("walsink: options: protocol version %d (want 4 for MQTT 3.1.1 or 5)", o.ProtocolVersion)
	}
	if o.MessageExpiry < 0 || o.MessageExpiry > math.MaxUint32*time.Second {
		return fmt.Errorf("walsink: options: message expiry %v out of 0..%ds", o.MessageExpiry, uint32(math.MaxUint32))
	}
	if o.SessionExpiry != 0 && (o.SessionExpiry < time.Second || o.SessionExpiry >= math.MaxUint32*time.Second) {
		return fmt.Errorf("walsink: options: session expiry %v out of 1s..%ds", o.SessionExpiry, uint32(math.MaxUint32-1))
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	return nil
}
