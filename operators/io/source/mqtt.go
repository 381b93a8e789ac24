package source

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// MQTT source defaults.
const (
	DefaultKeepAlive    = 30 * time.Second
	DefaultReconnectMin = time.Second
	DefaultReconnectMax = time.Minute
	DefaultMaxPending   = 100000
	connectTimeout      = 10 * time.Second
	// disconnectQuiesceMs bounds how long a disconnect waits for the acks
	// already handed to paho and the DISCONNECT to be written. Every
	// disconnect waits, also one while SUBSCRIBE is pending: a broker with a
	// persistent session sends its queued messages before the SUBACK, and the
	// agent may have acked them. paho's Disconnect(0) returns at once and
	// closes the connection later, so the next Run's connection could take
	// the session over before those acks left.
	disconnectQuiesceMs = 250
)

// MQTTOptions configures an MQTT source.
type MQTTOptions struct {
	// Broker is the broker URL: tcp://, ssl://, ws:// or wss://host:port.
	Broker string
	// ClientID identifies the session at the broker; it must be stable
	// across restarts for a persistent session, and unique per device
	// (use ${device_id}). Required.
	ClientID string
	// Topics are the filters to subscribe to, all at QoS. Required.
	Topics []string
	// QoS is the subscription QoS, 0, 1 or 2. 0 is at most once: messages
	// are lost while disconnected and may be dropped here (MaxPending).
	QoS byte
	// Username and Password, if set, are sent on connect.
	Username, Password string
	// CleanSession false (the zero value, and the right choice) keeps the
	// session at the broker across disconnects: subscriptions persist and
	// QoS 1/2 messages are queued while Eddy is away, and unacknowledged
	// ones are redelivered.
	CleanSession bool
	// KeepAlive is the MQTT keepalive interval. Default DefaultKeepAlive.
	KeepAlive time.Duration
	// PingTimeout is how long the connection may stay quiet after a
	// PINGREQ before it counts as lost: it is lost only when its PINGREQ
	// is unanswered and nothing at all arrived from the broker for
	// PingTimeout since the PINGREQ or the last bytes read, whichever is
	// later (see liveness). Default DefaultPingTimeout.
	PingTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the wait before a connection
	// attempt after a failure or a lost connection; it doubles per failed
	// attempt. Defaults DefaultReconnectMin, DefaultReconnectMax.
	ReconnectMin, ReconnectMax time.Duration
	// TLS configures ssl:// and wss:// connections.
	TLS *tls.Config
	// OnConnectionChange, if set, is called with true after each connection
	// is made and subscribed, and with false when it is lost. Calls are
	// sequential; it must not block for long.
	OnConnectionChange func(connected bool)
	// MaxPending caps the QoS 0 messages held between the connection and
	// Run's delivery; more are dropped and counted. Default DefaultMaxPending.
	// QoS 1/2 messages are not capped: they stay unacknowledged at the
	// broker until the receiver calls Ack, so the broker's in-flight window
	// per client bounds them (mosquitto: max_inflight_messages, which must
	// not be 0 = unlimited; ~1000 is right for Eddy).
	MaxPending int
	// MaxMessageSize bounds a message's payload: a larger one is delivered
	// with TooLarge set and its payload cut to TooLargeKeep bytes, without
	// ever being held whole on tcp:// connections (the packet is read past,
	// not into memory). Default DefaultMaxMessageSize.
	MaxMessageSize int
	// ProtocolVersion is the MQTT version spoken: 4 (MQTT 3.1.1, through
	// paho; also 0) or 5 (MQTT 5, on tcp://, mqtt:// and ssl:// brokers,
	// v5.go). At 5 a broker that refuses the version gets 3.1.1 for the
	// rest of the run, said once.
	ProtocolVersion byte
	// SessionExpiry is the MQTT 5 Session Expiry Interval: how long the
	// broker keeps the session (and queues messages for it) after a
	// disconnect. 0: never expires (clean start 0), as 3.1.1's persistent
	// session.
	SessionExpiry time.Duration
	// ReceiveMaximum is the MQTT 5 Receive Maximum the source announces:
	// the most QoS 1/2 messages the broker may have sent it and not seen
	// acknowledged. Default DefaultReceiveMaximum.
	ReceiveMaximum uint16
}

// DefaultMaxMessageSize is MQTTOptions.MaxMessageSize's default.
const DefaultMaxMessageSize = 256 << 10

// TooLargeKeep is how many payload bytes a TooLarge message keeps: enough
// to recognize it in a dead letter.
const TooLargeKeep = 1 << 10

func (o *MQTTOptions) setDefaults() {
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = DefaultPingTimeout
	}
	if o.ReconnectMin == 0 {
		o.ReconnectMin = DefaultReconnectMin
	}
	if o.ReconnectMax == 0 {
		o.ReconnectMax = DefaultReconnectMax
	}
	if o.ReconnectMax < o.ReconnectMin {
		o.ReconnectMax = o.ReconnectMin
	}
	if o.MaxPending == 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.ReceiveMaximum == 0 {
		o.ReceiveMaximum = DefaultReceiveMaximum
	}
}

// Check reports what Run of NewMQTT(o) would refuse, without connecting.
func (o MQTTOptions) Check() error {
	o.setDefaults()
	return o.validate()
}

func (o *MQTTOptions) validate() error {
	u, err := url.Parse(o.Broker)
	if err != nil {
		return fmt.Errorf("source: mqtt broker URL %q: %w", o.Broker, err)
	}
	switch u.Scheme {
	case "tcp", "ssl", "ws", "wss", "mqtt", "mqtts", "tls":
	default:
		return fmt.Errorf("source: mqtt broker URL %q: scheme must be tcp, ssl, ws or wss", o.Broker)
	}
	if u.Host == "" {
		return fmt.Errorf("source: mqtt broker URL %q: no host", o.Broker)
	}
	if o.ClientID == "" {
		return errors.New("source: mqtt client id is required (a stable id keeps the broker session)")
	}
	if len(o.Topics) == 0 {
		return errors.New("source: mqtt source has no topics")
	}
	if o.QoS > 2 {
		return fmt.Errorf("source: mqtt qos %d: must be 0, 1 or 2", o.QoS)
	}
	switch o.ProtocolVersion {
	case 0, 4:
	case 5:
		if !v5Scheme(o.Broker) {
			return fmt.Errorf("source: mqtt broker URL %q: MQTT 5 is spoken on tcp://, mqtt:// and ssl:// brokers; set protocol version 4", o.Broker)
		}
	default:
		return fmt.Errorf("source: mqtt protocol version %d: must be 4 (MQTT 3.1.1) or 5", o.ProtocolVersion)
	}
	if o.MaxPending < 0 {
		return fmt.Errorf("source: mqtt max pending %d: must be positive", o.MaxPending)
	}
	return nil
}

// MQTT reads messages from an MQTT broker with paho.
//
// Acknowledgements are manual: a QoS 1/2 message is acked to the broker only
// when the receiver calls Message.Ack, so the broker keeps (and, after a
// reconnect, redelivers) everything not yet safely handed over. Receiving
// never blocks the connection's reader (a blocked reader stops paho's
// keepalive: ping timeouts and reconnect loops follow); it appends to a
// queue, and Run moves the queue to out in batches of up to MaxBatch.
//
// Connection: Run connects, subscribes, and on any failure or loss waits
// (ReconnectMin doubling up to ReconnectMax), then connects and subscribes
// again with a fresh paho client, forever until ctx ends. paho does not
// deduplicate redelivered QoS 2 messages, and QoS 1 is at least once:
// receivers must recognize duplicates.
//
// On tcp:// and mqtt:// brokers the connection (coalescingConn) reads the
// PUBLISH packets itself and queues them from the socket's reader
// goroutine, waking Run's delivery once per read(2); it writes the acks
// itself, those of a batch in one write(2), and coalesces paho's writes.
// paho keeps the session (connect, subscribe, keepalive, the QoS 2
// PUBREL/PUBCOMP, disconnect). On other brokers messages go through paho's
// handler and acks through paho.
//
// Keepalive: paho sends the PINGREQs, but the connection decides when the
// broker is gone (liveness): only when nothing at all was read from it for
// PingTimeout after an unanswered PINGREQ. A PINGRESP that comes late
// while messages keep arriving (a broker starved of CPU) does not drop the
// connection; a silent broker is noticed within KeepAlive + PingTimeout.
type MQTT struct {
	opts MQTTOptions
	log  *slog.Logger
	q    *pending

	running    atomic.Bool
	received   atomic.Uint64
	dropped    atomic.Uint64
	reconnects atomic.Uint64
	connected  atomic.Bool
	// session is the broker session's number in ConnID (a SharedMQTT
	// connection's index), connSeq the last connection's Seq.
	session uint16
	connSeq atomic.Uint32
	// v4 is set once the broker refused MQTT 5: the rest of the run speaks
	// 3.1.1 (connectLoop's goroutine only).
	v4 bool
}

// connState is one connection's identity, for the messages it delivers.
type connState struct {
	id      ConnID
	resumed bool          // written before ready is closed
	ready   chan struct{} // closed once the CONNACK is known (or the connect failed)
}

// NewMQTT returns an MQTT source; Run connects. Options are checked by Run.
func NewMQTT(opts MQTTOptions, log *slog.Logger) Source {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts.Topics = append([]string(nil), opts.Topics...)
	opts.setDefaults()
	return &MQTT{opts: opts, log: log.With("broker", opts.Broker, "client_id", opts.ClientID), q: newPending()}
}

// Stats implements StatsReporter.
func (s *MQTT) Stats() Stats {
	return Stats{
		Received:   s.received.Load(),
		Dropped:    s.dropped.Load(),
		Reconnects: s.reconnects.Load(),
		Connected:  s.connected.Load(),
		Pending:    s.q.len(),
	}
}

// Run implements Source. It returns an error only for invalid options; it
// keeps reconnecting otherwise, and returns nil when ctx is cancelled, after
// disconnecting. Messages queued but not delivered stay queued for a later
// Run (QoS 1/2 ones are also redelivered by the broker after a reconnect).
func (s *MQTT) Run(ctx context.Context, out chan<- []Message) error {
	if err := s.opts.validate(); err != nil {
		return err
	}
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("source: mqtt source is already running")
	}
	defer s.running.Store(false)
	if s.opts.QoS == 0 {
		s.log.Warn("mqtt source subscribes at QoS 0: at most once, messages are lost while disconnected or when more than max_pending wait")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { s.connectLoop(ctx) })
	s.q.deliver(ctx, out)
	wg.Wait()
	return nil
}

// connectLoop keeps one connection up until ctx ends.
func (s *MQTT) connectLoop(ctx context.Context) {
	wait := s.opts.ReconnectMin
	first := true
	for {
		cs := &connState{id: ConnID{Session: s.session, Seq: s.connSeq.Add(1)}, ready: make(chan struct{})}
		sess, err := s.connectOnce(ctx, cs)
		if ctx.Err() != nil {
			if sess != nil {
				sess.close()
			}
			return
		}
		if err != nil {
			s.log.Error("mqtt source: connect failed", "error", err, "retry_in", wait)
			if !sleepCtx(ctx, wait) {
				return
			}
			wait = min(2*wait, s.opts.ReconnectMax)
			continue
		}
		if !first {
			s.reconnects.Add(1)
		}
		first = false
		wait = s.opts.ReconnectMin
		s.setConnected(true)
		select {
		case <-ctx.Done():
			sess.close()
			s.setConnected(false)
			return
		case err := <-sess.lostCh():
			sess.close()
			s.setConnected(false)
			s.log.Warn("mqtt source: connection lost", "error", err, "retry_in", wait)
		}
		if !sleepCtx(ctx, wait) {
			return
		}
	}
}

// session is one connection of the source, at either version.
type session interface {
	lostCh() <-chan error // receives why the connection ended
	close()               // disconnects; idempotent once lost
}

// connectOnce makes connection cs: MQTT 5 unless the options or the
// broker say 3.1.1. A broker that refuses MQTT 5 is tried at 3.1.1 at
// once; one that refused it in its CONNACK, or accepts 3.1.1 after
// closing the MQTT 5 CONNECT, gets 3.1.1 for the rest of the run.
func (s *MQTT) connectOnce(ctx context.Context, cs *connState) (session, error) {
	if s.opts.ProtocolVersion == 5 && !s.v4 {
		sess, err := s.connectV5(ctx, cs)
		if !errors.Is(err, errV5Refused) && !errors.Is(err, errV5Closed) {
			if sess == nil {
				return nil, err
			}
			return sess, err
		}
		cs = &connState{id: ConnID{Session: s.session, Seq: s.connSeq.Add(1)}, ready: make(chan struct{})}
		sess4, err4 := s.connectV4(ctx, cs)
		if err4 == nil && !s.v4 {
			s.v4 = true
			s.log.Warn("mqtt source: the broker does not speak MQTT 5; using MQTT 3.1.1 for this run (no receive maximum: the broker's in-flight window bounds the unacknowledged messages)", "why", err)
		}
		if sess4 == nil {
			return nil, err4
		}
		return sess4, err4
	}
	sess, err := s.connectV4(ctx, cs)
	if sess == nil {
		return nil, err
	}
	return sess, err
}

// pahoSession is a 3.1.1 connection through paho.
type pahoSession struct {
	client paho.Client
	lost   chan error
}

func (p *pahoSession) lostCh() <-chan error { return p.lost }
func (p *pahoSession) close()               { p.client.Disconnect(disconnectQuiesceMs) }

// connectV4 connects cs at MQTT 3.1.1 with a fresh paho client. On ctx's
// end it returns the session so the caller disconnects it.
func (s *MQTT) connectV4(ctx context.Context, cs *connState) (*pahoSession, error) {
	lost := make(chan error, 1)
	client := paho.NewClient(s.clientOptions(lost, cs))
	err := s.connect(ctx, client, cs)
	if err != nil && ctx.Err() == nil {
		return nil, err
	}
	return &pahoSession{client: client, lost: lost}, err
}

// setConnected reports a connection change; the callback runs first, so
// whoever sees Stats().Connected change knows the callback has run.
func (s *MQTT) setConnected(up bool) {
	if s.opts.OnConnectionChange != nil {
		s.opts.OnConnectionChange(up)
	}
	s.connected.Store(up)
}

// clientOptions are the options of connection cs's client.
func (s *MQTT) clientOptions(lost chan<- error, cs *connState) *paho.ClientOptions {
	o := paho.NewClientOptions().
		AddBroker(s.opts.Broker).
		SetClientID(s.opts.ClientID).
		SetUsername(s.opts.Username).
		SetPassword(s.opts.Password).
		SetCleanSession(s.opts.CleanSession).
		SetKeepAlive(s.opts.KeepAlive).
		SetPingTimeout(pahoPingTimeout). // the connection's liveness judges instead
		SetConnectTimeout(connectTimeout).
		SetAutoReconnect(false). // Run reconnects, with its own backoff and a fresh client
		SetConnectRetry(false).
		SetResumeSubs(false). // Run subscribes on every connection
		SetAutoAckDisabled(true).
		SetOrderMatters(true). // one handler goroutine: messages stay in order
		// The default handler receives everything, including messages the
		// broker sends from the persistent session before SUBSCRIBE is done.
		SetDefaultPublishHandler(func(_ paho.Client, pm paho.Message) { s.onMessage(cs, pm) }).
		// paho's store keeps each received QoS 1/2 message until its ack,
		// to resume a session in the same client; Run makes a fresh client
		// per connection, so it would never be read, and acks written to
		// the connection directly (coalescingConn) would never remove its
		// entries.
		SetStore(noStore{}).
		SetConnectionLostHandler(func(_ paho.Client, err error) {
			select {
			case lost <- err:
			default:
			}
		})
	if s.opts.TLS != nil {
		o.SetTLSConfig(s.opts.TLS)
	}
	if u, err := url.Parse(s.opts.Broker); err == nil && (u.Scheme == "tcp" || u.Scheme == "mqtt") {
		// The connection reads PUBLISH packets itself, straight into the
		// queue, and writes the acks of a committed batch in one write
		// (coalescingConn); paho keeps the session: connect, subscribe,
		// keepalive, PUBREL/PUBCOMP, disconnect.
		o.SetCustomOpenConnectionFn(func(uri *url.URL, o paho.ClientOptions) (net.Conn, error) {
			c, err := coalescingDial(uri, o, s.opts.PingTimeout)
			if err != nil {
				return nil, err // not a nil *coalescingConn in a non-nil net.Conn
			}
			c.recv = publishReader{queue: s.queue, wake: s.q.signal, maxSize: s.opts.MaxMessageSize}
			c.in.conn = cs.id // the connection reads the CONNACK's session present itself
			return c, nil
		})
	} else {
		// paho reads these connections; liveConn only watches them for
		// the keepalive rule.
		o.SetCustomOpenConnectionFn(func(uri *url.URL, o paho.ClientOptions) (net.Conn, error) {
			return liveDial(uri, o, s.opts.PingTimeout)
		})
	}
	return o
}

// connect connects client (connection cs) and subscribes to the topics.
func (s *MQTT) connect(ctx context.Context, client paho.Client, cs *connState) error {
	tok := client.Connect()
	err := waitToken(ctx, tok)
	ct, ok := tok.(*paho.ConnectToken)
	if err == nil && ok {
		cs.resumed = ct.SessionPresent()
	}
	close(cs.ready)
	if err != nil {
		return fmt.Errorf("source: mqtt connect: %w", err)
	}
	if ok && !s.opts.CleanSession && !cs.resumed {
		s.log.Info("mqtt source: broker has no session for this client id; messages published while it was away are not delivered")
	}
	filters := make(map[string]byte, len(s.opts.Topics))
	for _, t := range s.opts.Topics {
		filters[t] = s.opts.QoS
	}
	sub := client.SubscribeMultiple(filters, nil)
	if err := waitToken(ctx, sub); err != nil {
		client.Disconnect(disconnectQuiesceMs)
		return fmt.Errorf("source: mqtt subscribe: %w", err)
	}
	if st, ok := sub.(*paho.SubscribeToken); ok {
		for topic, granted := range st.Result() {
			if granted == 0x80 {
				client.Disconnect(disconnectQuiesceMs)
				return fmt.Errorf("source: mqtt subscribe to %q refused by the broker", topic)
			}
		}
	}
	s.log.Info("mqtt source connected", "topics", s.opts.Topics, "qos", s.opts.QoS)
	return nil
}

// onMessage is paho's message handler of connection cs, for brokers other
// than tcp:// (coalescingConn takes tcp:// ones' messages before paho). It
// never blocks, but for the moment between paho starting to read and
// Connect's token completing, when the session-present bit is not yet
// known to connect.
func (s *MQTT) onMessage(cs *connState, pm paho.Message) {
	<-cs.ready
	m := Message{Topic: pm.Topic(), Payload: pm.Payload(), Arrival: time.Now().UnixMilli(), Dup: pm.Duplicate(),
		Conn: cs.id, Resumed: cs.resumed}
	if len(m.Payload) > s.opts.MaxMessageSize { // paho has read it whole: only tcp:// avoids that
		n := min(len(m.Payload), TooLargeKeep)
		m.Payload, m.TooLarge = m.Payload[:n:n], true
	}
	if pm.Qos() > 0 {
		m.ack = pm.Ack
	}
	s.queue(m, pm.Qos())
	s.q.signal()
}

// queue queues m, received at QoS qos, without waking Run's delivery. It
// never blocks: QoS 1/2 messages are bounded by the broker's in-flight
// window, QoS 0 ones by MaxPending (beyond which they are dropped).
func (s *MQTT) queue(m Message, qos byte) {
	limit := 0
	if qos == 0 {
		limit = s.opts.MaxPending
	}
	if !s.q.pushQuiet(&m, limit) {
		if s.dropped.Add(1) == 1 {
			s.log.Warn("mqtt source: QoS 0 message dropped, pending queue full; further drops are only counted", "max_pending", limit)
		}
		return
	}
	s.received.Add(1)
}

// waitToken waits for tok or ctx.
func waitToken(ctx context.Context, tok paho.Token) error {
	select {
	case <-tok.Done():
		return tok.Error()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sleepCtx waits for d or ctx; it reports false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// noStore is a paho.Store that keeps nothing (see clientOptions).
type noStore struct{}

func (noStore) Open()                             {}
func (noStore) Put(string, packets.ControlPacket) {}
func (noStore) Get(string) packets.ControlPacket  { return nil }
func (noStore) All() []string                     { return nil }
func (noStore) Del(string)                        {}
func (noStore) Close()                            {}
func (noStore) Reset()                            {}
