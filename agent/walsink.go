package agent

import (
	"crypto/tls"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/agent/identity"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/io/broker"
	"github.com/eddy-edge/eddy/operators/io/sink"
	"github.com/eddy-edge/eddy/operators/io/walsink"
	"github.com/eddy-edge/eddy/operators/record"
)

// walTx adapts the exactly-once MQTT sink to the agent's txSink: it renders
// each result's topic from the sink's template. It takes no lock of its
// own: the sink runner calls Write and PreCommit, the checkpointer Commit,
// and walsink.Sink allows Commit concurrently with them. A Write blocked on
// a full WAL (when_full = "block") waits for the uplink; a lock held across
// it would stop the checkpointer with it: no commit, no checkpoint timeout,
// no ingest log truncation, until the uplink returns.
type walTx struct {
	s        *walsink.Sink
	expiry   bool // message_expiry set: every PUBLISH carries a Message Expiry Interval
	topic    *sink.Template
	deviceID string
	msgs     []walsink.Message
	buf      []byte
}

func (w *walTx) Write(epoch uint64, items []record.Item) error {
	w.msgs = w.msgs[:0]
	w.buf = w.buf[:0]
	for _, it := range items {
		start := len(w.buf)
		w.buf = w.topic.Append(w.buf, w.deviceID, it.Result)
		w.msgs = append(w.msgs, walsink.Message{Topic: string(w.buf[start:]), Payload: it.Payload})
	}
	return w.s.Write(epoch, w.msgs)
}

// overPacketLimit reports, for a result it, the size of its MQTT 5
// PUBLISH and the Maximum Packet Size the sink's broker announced, with
// over set when the PUBLISH is larger: such a result would be dead-lettered
// by the sink's publisher (never published); its pipeline dead-letters it
// first, to its dead_letter sink (stages.Sink.PacketLimit). It is safe for
// concurrent use (the window subtasks call it) and cheap while no limit is
// announced.
func (w *walTx) overPacketLimit(it record.Item) (size, limit int64, over bool) {
	limit = w.s.MaxPacketSize()
	if limit <= 0 || 2*int64(len(it.Payload))+maxPublishOverhead <= limit {
		// No limit, or the result is so far under it that no topic and
		// properties can carry it over.
		return 0, limit, false
	}
	var arr [256]byte
	topic := w.topic.Append(arr[:0], w.deviceID, it.Result)
	size = walsink.PublishSize(topic, it.Payload, w.expiry)
	return size, limit, size > limit
}

// maxPublishOverhead bounds what an MQTT 5 PUBLISH adds to its payload
// besides the id property (at most the payload's length): fixed header,
// a topic of at most 65,535 bytes, packet id, properties.
const maxPublishOverhead = 5 + 2 + 65535 + 2 + 64

func (w *walTx) PreCommit(epoch uint64) error {
	return w.s.PreCommit(epoch)
}

func (w *walTx) Commit(epoch uint64) error {
	return w.s.Commit(epoch)
}

func (w *walTx) Recover(last uint64) error {
	return w.s.Recover(last)
}

func (w *walTx) Close() error { return w.s.Close() }

// writeBlocked reports a Write waiting for room (when_full = "block").
func (w *walTx) writeBlocked() bool { return w.s.WriteBlocked() }

// openWALSink opens the exactly-once MQTT sink of s under data_dir/wal and
// exposes its backlog on /metrics.
func (df *dataflow) openWALSink(s *config.Sink, ep broker.Endpoint, tc *tls.Config) (*walTx, error) {
	opts, tmpl, err := walOptions(s.MQTT, ep.URL, df.vars())
	if err != nil {
		return nil, err
	}
	opts.Username, opts.Password, opts.TLS = ep.Username, ep.Password, tc
	set := df.metrics
	// Called by the sink's publisher goroutine alone, per answer (a QoS 1
	// sink whose results nobody subscribes to gets 0x10 on every PUBACK):
	// the counters are looked up without allocating.
	reasons := map[[2]string]*metrics.Counter{}
	opts.OnReason = func(packet, reason string) {
		c := reasons[[2]string{packet, reason}]
		if c == nil {
			c = set.GetOrCreateCounter(fmt.Sprintf(`eddy_wal_mqtt_reasons_total{sink=%q,packet=%q,reason=%q}`, s.Name, packet, reason))
			reasons[[2]string{packet, reason}] = c
		}
		c.Inc()
	}
	ws, err := walsink.Open(filepath.Join(df.cfg.Agent.DataDir, "wal", s.Name), opts, df.log.With("mqtt_sink", s.Name))
	if err != nil {
		return nil, err
	}
	w := &walTx{s: ws, topic: tmpl, deviceID: df.deviceID, expiry: opts.MessageExpiry > 0}
	h := df.walSinks[s.Name]
	if h == nil {
		h = new(walHolder)
		df.walSinks[s.Name] = h
		registerWALMetrics(df.metrics, s.Name, h)
	}
	h.s.Store(ws)
	h.drainTimeout = s.MQTT.DrainTimeout
	return w, nil
}

// walOptions are the options of the exactly-once MQTT sink m publishing to
// the broker at url, and its topic template.
func walOptions(m *config.MQTTSink, url string, vars map[string]string) (walsink.Options, *sink.Template, error) {
	tc, err := identity.ClientTLS(m.TLS)
	if err != nil {
		return walsink.Options{}, nil, err
	}
	tmpl, err := sink.ParseTemplate(m.Topic, nil)
	if err != nil {
		return walsink.Options{}, nil, err
	}
	opts := walsink.Options{
		Broker: url, ClientID: config.Expand(m.ClientID, vars), Username: m.Username, Password: m.Password,
		TLS: tc, MaxDiskBytes: m.Buffer.MaxDiskBytes, DrainRate: m.Buffer.DrainRate, Retain: m.Retain,
		WhenFull: walsink.Block, MaxInflight: m.MaxInflight, QoS: byte(m.QoS), ProtocolVersion: byte(m.ProtocolVersion),
		MessageExpiry: m.MessageExpiry, SessionExpiry: m.SessionExpiry,
		Immediate: m.Delivery == config.AtLeastOnce,
	}
	if m.Buffer.WhenFull == "drop_oldest" {
		opts.WhenFull = walsink.DropOldest
	}
	return opts, tmpl, nil
}

// walHolder is the current WAL sink of a name: a region restart reopens the
// sink, and the gauges registered once follow it.
type walHolder struct {
	s            atomic.Pointer[walsink.Sink]
	drainTimeout time.Duration // set when opened, read after the run
}

func registerWALMetrics(set *metrics.Set, name string, h *walHolder) {
	var (
		mu   sync.Mutex
		last walsink.Stats
		at   time.Time
	)
	// One Stats call serves every gauge of a scrape.
	stats := func() walsink.Stats {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(at) > 500*time.Millisecond {
			last, at = h.s.Load().Stats(), time.Now()
		}
		return last
	}
	l := fmt.Sprintf(`{sink=%q}`, name)
	set.NewGauge("eddy_wal_backlog_messages"+l, func() float64 { return float64(stats().BacklogMessages) })
	set.NewGauge("eddy_wal_backlog_bytes"+l, func() float64 { return float64(stats().BacklogBytes) })
	set.NewGauge("eddy_wal_oldest_age_seconds"+l, func() float64 { return stats().OldestAge.Seconds() })
	set.NewGauge("eddy_wal_disk_bytes"+l, func() float64 { return float64(stats().WALBytes) })
	set.NewGauge("eddy_wal_inflight"+l, func() float64 { return float64(stats().Inflight) })
	set.NewGauge("eddy_wal_window"+l, func() float64 { return float64(stats().Window) })
	set.NewGauge("eddy_wal_delivered_total"+l, func() float64 { return float64(stats().Delivered) })
	set.NewGauge("eddy_wal_retried_total"+l, func() float64 { return float64(stats().Retried) })
	set.NewGauge("eddy_wal_dropped_total"+l, func() float64 { return float64(stats().Dropped) })
	set.NewGauge("eddy_wal_too_large_total"+l, func() float64 { return float64(stats().TooLarge) })
	set.NewGauge("eddy_wal_expired_total"+l, func() float64 { return float64(stats().Expired) })
	set.NewGauge("eddy_wal_protocol_version"+l, func() float64 { return float64(stats().ProtocolVersion) })
	set.NewGauge("eddy_wal_write_blocked"+l, func() float64 {
		if stats().WriteBlocked {
			return 1
		}
		return 0
	})
	set.NewGauge("eddy_wal_connected"+l, func() float64 {
		if stats().Connected {
			return 1
		}
		return 0
	})
}
