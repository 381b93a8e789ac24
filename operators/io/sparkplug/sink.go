package sparkplug

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/state/vfs"
)

// SinkOptions configure a Sink.
type SinkOptions struct {
	// Broker is the broker URL: tcp://host:1883, ssl://host:8883, ws://….
	Broker             string
	ClientID           string
	Username, Password string
	TLS                *tls.Config
	Node               Config
	// BdSeqPath is the file NextBdSeq keeps the next bdSeq in; its
	// directory is created.
	BdSeqPath string
	// FS is the file system of BdSeqPath; nil is vfs.Default.
	FS vfs.FS
	// StoreDir is the directory of the log that keeps the results written
	// while the births are not out (the broker or the primary host away);
	// "" is BdSeqPath without its extension, plus ".wal".
	StoreDir string
	// MaxStoreBytes bounds that log; when a result would pass it, the
	// oldest segment's results are dropped and counted. 0 means 512 MiB.
	MaxStoreBytes int64
	// ProtocolVersion is 5 (MQTT 5, falling back to 3.1.1 for the rest of
	// the run when the broker does not speak it) or 4 (MQTT 3.1.1); 0 is
	// 4. ws:// and wss:// brokers get 3.1.1.
	ProtocolVersion int
	// AwaitRecover holds back the results read back from the log until
	// Recover has discarded those past the restored checkpoint: published
	// before, a result that replay computes again would go out twice.
	AwaitRecover bool
	// MaxRetryInterval caps the backoff between connection attempts, which
	// starts at 1 s. 0 means 10 s: a host shows the node offline until it
	// is back, so it retries sooner than the MQTT sink's minute.
	MaxRetryInterval time.Duration
	Log              *slog.Logger
}

// Sink publishes window results as a Sparkplug B edge node: each result's
// key is a device, its aggregates the device's metrics. It drives a Node
// over one connection at a time, MQTT 5 (link5) or 3.1.1 (a new paho
// client per connection), so that each CONNECT registers the NDEATH of its
// own bdSeq as its will.
//
// Results written while the births are not out, and all after them until
// those are out, are kept in a write-ahead log (store), in order, and
// published after the next births with is_historical set. The log takes
// part in the checkpoint's two-phase commit (WriteEpoch, PreCommit,
// Recover), so what a completed checkpoint covers survives a crash and is
// kept once. Sink is safe for concurrent use.
type Sink struct {
	opts    SinkOptions
	log     *slog.Logger
	closing chan struct{}
	done    chan struct{}

	mu     sync.Mutex // guards node, client, lost, store and closed
	node   *Node
	client conn   // the current connection's, once its births may go out
	lost   func() // ends the current connection (once)
	store  *store
	closed bool
	// recovered: Recover has run, or AwaitRecover is unset.
	recovered bool
	// version is the MQTT version of the next connection; only run's
	// goroutine uses it.
	version int
	// decoded reads results that reach the sink as JSON only.
	decoded resultJSON

	published, historical, dropped, refused atomic.Uint64
	protocol                                atomic.Int32 // of the last connection

	// unsent is a bdSeq reserved by NextBdSeq whose CONNECT never went out
	// (the broker could not be reached): the next attempt takes it, so
	// bdSeq grows by one per CONNECT, as the specification counts. Only
	// run's goroutine uses it.
	unsent    uint64
	hasUnsent bool
}

// SinkStats counts what a Sink did.
type SinkStats struct {
	Published  uint64 // DDATA messages handed to the connection
	Historical uint64 // of those, held results sent after a (re)birth
	Dropped    uint64 // held results dropped beyond MaxStoreBytes
	Refused    uint64 // results of keys beyond Node.MaxDevices, never published
	Held       int    // results held now
	HeldBytes  int64  // the size of the log that holds them
	Born       bool   // the births of the current connection are out
	BdSeq      uint64 // of the current or last connection
	Protocol   int    // its MQTT version, 4 or 5; 0 before the first
}

const (
	defaultMaxStoreBytes    = 512 << 20
	defaultMaxRetryInterval = 10 * time.Second
	publishTimeout          = 10 * time.Second
	disconnectQuiesceMillis = 250
)

// NewSink checks opts and starts connecting in the background: an agent
// starts while its uplink is down.
func NewSink(opts SinkOptions) (*Sink, error) {
	if u, err := url.Parse(opts.Broker); err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("sparkplug: broker %q: want scheme://host:port, e.g. tcp://127.0.0.1:1883", opts.Broker)
	}
	n, err := NewNode(opts.Node)
	if err != nil {
		return nil, err
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.MaxStoreBytes <= 0 {
		opts.MaxStoreBytes = defaultMaxStoreBytes
	}
	if opts.StoreDir == "" {
		opts.StoreDir = strings.TrimSuffix(opts.BdSeqPath, filepath.Ext(opts.BdSeqPath)) + ".wal"
	}
	if opts.MaxRetryInterval <= 0 {
		opts.MaxRetryInterval = defaultMaxRetryInterval
	}
	if opts.ClientID == "" {
		opts.ClientID = opts.Node.Node
	}
	if err := vfs.MkdirAllSynced(opts.FS, filepath.Dir(opts.BdSeqPath), 0o755); err != nil {
		return nil, err
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := openStore(opts.FS, opts.StoreDir, opts.MaxStoreBytes)
	if err != nil {
		return nil, err
	}
	if n := st.Len(); n > 0 {
		log.Info("sparkplug: results kept from an earlier run, to publish as historical after the births", "held", n, "dir", opts.StoreDir)
	}
	s := &Sink{opts: opts, log: log, node: n, store: st, recovered: !opts.AwaitRecover, version: 4, closing: make(chan struct{}), done: make(chan struct{})}
	if opts.ProtocolVersion == 5 && linkable(opts.Broker) {
		s.version = 5
	}
	go s.run()
	return s, nil
}

// Stats returns the counters.
func (s *Sink) Stats() SinkStats {
	s.mu.Lock()
	held, born, bd := s.store.Len(), s.node.Born(), s.node.BdSeq()
	s.mu.Unlock()
	return SinkStats{Published: s.published.Load(), Historical: s.historical.Load(), Dropped: s.dropped.Load(), Refused: s.refused.Load(),
		Held: held, HeldBytes: s.store.Bytes(), Born: born, BdSeq: bd, Protocol: int(s.protocol.Load())}
}

// ErrClosed is returned by a Sink's methods after Close.
var ErrClosed = errors.New("sparkplug: sink closed")

// Write is WriteEpoch(0, items), for a caller outside the checkpoint
// protocol.
func (s *Sink) Write(items []record.Item) error { return s.WriteEpoch(0, items) }

// WriteEpoch publishes each result of epoch (between checkpoints epoch-1
// and epoch) as its device's DDATA (after its DBIRTH), or appends it to
// the store while the node is not born or earlier results are still held.
// It does not wait for the broker: data messages are QoS 0.
func (s *Sink) WriteEpoch(epoch uint64, items []record.Item) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	now := time.Now().UnixMilli()
	for i := range items {
		r := items[i].Result
		if r == nil {
			// A bounded file's results are released at the end of input as
			// their JSON alone (agent/stages/ordered.go).
			var err error
			if r, err = s.decoded.decode(items[i].Payload); err != nil {
				return err
			}
		}
		if s.store.Len() == 0 {
			if s.node.Born() && !s.node.Admit(r.Key) {
				s.refuse(r.Key)
				continue
			}
			if acts, ok := s.node.Result(r.Key, r.Names, r.Values, r.End, false, now); ok {
				if s.do(acts) {
					s.published.Add(1)
					continue
				}
				// The client knew the connection was gone before this sink did:
				// keep the result for the next session.
				s.endSession()
			}
		}
		s.store.add(epoch, r.Key, r.Names, r.Values, r.End)
	}
	n, err := s.store.flush()
	if n > 0 && s.dropped.Add(uint64(n)) == uint64(n) {
		s.log.Warn("sparkplug: results held while the node is not born exceed the store's bound: dropping the oldest",
			"max_bytes", s.opts.MaxStoreBytes, "dir", s.opts.StoreDir)
	}
	return err
}

// PreCommit makes the results held so far durable: checkpoint epoch,
// which the caller acknowledges next, covers them.
func (s *Sink) PreCommit(epoch uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.store.sync()
}

// Commit does nothing: held results are published once the node is born,
// whether or not their checkpoint has completed (Recover discards those of
// a checkpoint that never did).
func (s *Sink) Commit(uint64) error { return nil }

// Recover discards the held results of epochs after last, the checkpoint
// the run restored: replay computes them again.
func (s *Sink) Recover(last uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.store.recover(last)
	if n > 0 {
		s.log.Info("sparkplug: held results after the restored checkpoint discarded: replay computes them again", "discarded", n, "checkpoint", last)
	}
	if err != nil {
		return err
	}
	s.recovered = true
	s.sendHeld(time.Now().UnixMilli())
	return nil
}

// sendHeld publishes the held results as historical once the node is
// born, oldest first, before anything newer.
func (s *Sink) sendHeld(now int64) {
	if !s.recovered {
		return
	}
	popped, sent := 0, 0
	for s.store.Len() > 0 && s.node.Born() {
		h, key, values, err := s.store.first()
		if err != nil {
			s.log.Error("sparkplug: reading a held result back failed: the held results stay in the log", "dir", s.opts.StoreDir, "err", err)
			break
		}
		if !s.node.Admit(key) {
			s.refuse(key)
			s.store.pop()
			popped++
			continue
		}
		acts, ok := s.node.Result(key, h.names, values, h.tsMs, true, now)
		if !ok {
			break
		}
		if !s.do(acts) {
			s.endSession()
			break
		}
		s.store.pop()
		popped++
		sent++
	}
	if popped == 0 {
		return
	}
	s.published.Add(uint64(sent))
	s.historical.Add(uint64(sent))
	if err := s.store.published(); err != nil {
		s.log.Warn("sparkplug: recording published results failed: a restart may publish them again", "err", err)
	}
}

// refuse counts a result of a key beyond the device table's bound, which
// is never published (a host would keep a device per key for good, and
// every rebirth would repeat them all); the first is logged.
func (s *Sink) refuse(key []byte) {
	if s.refused.Add(1) == 1 {
		s.log.Warn("sparkplug: a result of a new key past the bound of devices per node is not published; later ones are counted in eddy_sparkplug_refused_total",
			"key", string(key), "max_devices", s.node.cfg.MaxDevices)
	}
}

// Flush returns nil: results are QoS 0, handed to the connection by Write.
func (s *Sink) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

// Close ends the session with an NDEATH (the broker drops the will on a
// clean DISCONNECT) and disconnects.
func (s *Sink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	if n := s.store.Len(); n > 0 {
		s.log.Warn("sparkplug: results still held when the sink closed (the node was not born: broker or primary host away); the next start publishes them",
			"held", n, "broker", s.opts.Broker)
	}
	s.mu.Unlock()
	close(s.closing)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.store.close()
}

// endSession ends a session whose publish failed: nothing is published
// until the next connection's births, which session() makes once this
// connection is closed. s.mu is held.
func (s *Sink) endSession() {
	s.node.Disconnected()
	if s.lost != nil {
		s.lost()
	}
}

// conn is one MQTT connection of the sink: paho's (3.1.1) or link5.
type conn interface {
	// publish publishes a; it reports false when the connection is
	// already known gone (the caller keeps the result it was for). A
	// QoS 1 publish waits for its acknowledgement; one that fails is
	// logged.
	publish(a *Action) bool
}

// pahoConn is a paho client as a conn.
type pahoConn struct {
	c   paho.Client
	log *slog.Logger
}

func (p pahoConn) publish(a *Action) bool {
	// paho keeps the payload until it is written; the Node reuses its
	// buffer at the next call.
	tok := p.c.Publish(a.Topic, a.QoS, a.Retain, append([]byte(nil), a.Payload...))
	if a.QoS > 0 {
		if !tok.WaitTimeout(publishTimeout) || tok.Error() != nil {
			p.log.Warn("sparkplug: publish failed", "topic", a.Topic, "err", tok.Error())
		}
		return true
	}
	select {
	case <-tok.Done():
		return tok.Error() == nil
	default:
	}
	return true
}

// link5Conn is a link5 as a conn.
type link5Conn struct {
	l   *link5
	log *slog.Logger
}

func (c link5Conn) publish(a *Action) bool {
	err := c.l.publish(a.Topic, a.QoS, a.Retain, a.Payload)
	if err != nil && a.QoS > 0 {
		c.log.Warn("sparkplug: publish failed", "topic", a.Topic, "err", err)
		return true
	}
	return err == nil
}

// do performs a Node's actions on the current connection; s.mu is held.
// It reports false when a publish failed at once (the client already
// knows the connection is gone): the caller keeps the result it was for.
// A QoS 0 publish written to a connection that only later proves dead is
// lost unnoticed, as QoS 0 is.
func (s *Sink) do(acts []Action) bool {
	for i := range acts {
		switch acts[i].Kind {
		case Publish:
			if s.client == nil || !s.client.publish(&acts[i]) {
				return false
			}
		case Disconnect:
			if s.lost != nil {
				s.lost()
			}
		}
	}
	return true
}

// run keeps one connection up at a time until Close.
func (s *Sink) run() {
	defer close(s.done)
	wait := time.Second
	failing := false // an outage is logged once at WARN, its retries at DEBUG
	for {
		up, err := s.session()
		switch {
		case err != nil && !failing:
			s.log.Warn("sparkplug: connection failed; retrying", "broker", s.opts.Broker, "err", err)
			failing = true
		case err != nil:
			s.log.Debug("sparkplug: connection failed", "broker", s.opts.Broker, "err", err)
		}
		if up {
			wait, failing = time.Second, false
		}
		t := time.NewTimer(wait)
		select {
		case <-s.closing:
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, s.opts.MaxRetryInterval)
	}
}

// session makes one connection with a new bdSeq and serves it until it is
// lost or the sink closes. up reports whether the CONNECT succeeded.
func (s *Sink) session() (up bool, err error) {
	select {
	case <-s.closing:
		return false, nil
	default:
	}
	bd := s.unsent
	if !s.hasUnsent {
		if bd, err = NextBdSeq(s.opts.FS, s.opts.BdSeqPath); err != nil {
			return false, err
		}
	}
	s.hasUnsent = false
	s.mu.Lock()
	will := s.node.Connect(bd, time.Now().UnixMilli())
	// The Node reuses its buffer; the will outlives this call.
	will.Payload = append([]byte(nil), will.Payload...)
	s.mu.Unlock()
	if s.version == 5 {
		up, err = s.session5(bd, will)
		if !errors.Is(err, errV5Refused) {
			return up, err
		}
		s.version = 4
		s.log.Warn("sparkplug: the broker does not speak MQTT 5: MQTT 3.1.1 for the rest of the run", "broker", s.opts.Broker, "err", err)
		// The refused CONNECT registered no will: the 3.1.1 one takes bd.
		s.mu.Lock()
		will = s.node.Connect(bd, time.Now().UnixMilli())
		will.Payload = append([]byte(nil), will.Payload...)
		s.mu.Unlock()
	}
	return s.session4(bd, will)
}

// session4 serves one MQTT 3.1.1 connection through paho, will (the
// NDEATH of bd) registered with its CONNECT.
func (s *Sink) session4(bd uint64, will Action) (up bool, err error) {
	// Set when the socket could not be opened: no CONNECT (and no will)
	// went out with bd.
	var openFailed atomic.Bool
	lost := make(chan struct{})
	var once sync.Once
	end := func() { once.Do(func() { close(lost) }) }
	// Protocol version fixed at 3.1.1: paho would otherwise retry a refused
	// CONNECT as MQTT 3.1, a second CONNECT with the same bdSeq.
	o := paho.NewClientOptions().AddBroker(s.opts.Broker).SetClientID(s.opts.ClientID).SetProtocolVersion(4).
		SetCleanSession(true).SetAutoReconnect(false).SetConnectRetry(false).
		SetConnectionNotificationHandler(func(_ paho.Client, n paho.ConnectionNotification) {
			if _, ok := n.(paho.ConnectionNotificationBrokerFailed); ok {
				openFailed.Store(true)
			}
		}).
		SetConnectTimeout(publishTimeout).SetWriteTimeout(publishTimeout).
		SetBinaryWill(will.Topic, will.Payload, will.QoS, will.Retain).
		SetConnectionLostHandler(func(_ paho.Client, err error) {
			s.log.Warn("sparkplug: connection lost", "broker", s.opts.Broker, "err", err)
			end()
		}).
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) { s.onMessage(m.Topic(), m.Payload()) })
	if s.opts.Username != "" {
		o.SetUsername(s.opts.Username).SetPassword(s.opts.Password)
	}
	if s.opts.TLS != nil {
		o.SetTLSConfig(s.opts.TLS)
	}
	o.SetOnConnectHandler(func(c paho.Client) {
		for _, topic := range s.node.Subscriptions() {
			if tok := c.Subscribe(topic, 1, nil); !tok.WaitTimeout(publishTimeout) || tok.Error() != nil {
				s.log.Warn("sparkplug: subscribe failed", "topic", topic, "err", tok.Error())
				end()
				return
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		select {
		case <-lost: // lost or closing before this handler ran: session() has moved on
			return
		case <-s.closing:
			return
		default:
		}
		s.client, s.lost = pahoConn{c, s.log}, end
		s.connected(bd, 4)
	})
	c := paho.NewClient(o)
	tok := c.Connect()
	select {
	case <-tok.Done():
	case <-s.closing:
		c.Disconnect(0)
		return false, nil
	}
	if err := tok.Error(); err != nil {
		s.mu.Lock()
		s.node.Disconnected()
		s.mu.Unlock()
		s.unsent, s.hasUnsent = bd, openFailed.Load()
		return false, err
	}
	select {
	case <-lost:
		s.mu.Lock()
		s.node.Disconnected()
		s.client, s.lost = nil, nil
		s.mu.Unlock()
		c.Disconnect(disconnectQuiesceMillis)
	case <-s.closing:
		s.mu.Lock()
		s.client = pahoConn{c, s.log}
		s.do(s.node.Death(time.Now().UnixMilli()))
		s.client, s.lost = nil, nil
		s.mu.Unlock()
		c.Disconnect(disconnectQuiesceMillis)
	}
	return true, nil
}

// connected publishes a new connection's births and what is held; s.mu
// is held.
func (s *Sink) connected(bd uint64, version int) {
	s.protocol.Store(int32(version))
	now := time.Now().UnixMilli()
	s.do(s.node.Connected(now))
	s.sendHeld(now)
	s.log.Info("sparkplug: connected", "broker", s.opts.Broker, "mqtt", version, "bdSeq", bd, "born", s.node.Born())
}

// session5 serves one MQTT 5 connection (link5), will (the NDEATH of bd)
// registered with its CONNECT. It returns errV5Refused, having published
// nothing, from a broker that does not speak 5.
func (s *Sink) session5(bd uint64, will Action) (up bool, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	l, opened, err := dial5(ctx, &s.opts, will)
	if err != nil {
		s.mu.Lock()
		s.node.Disconnected()
		s.mu.Unlock()
		// No CONNECT (and no will) went out with bd: the next attempt
		// takes it.
		s.unsent, s.hasUnsent = bd, !opened && !errors.Is(err, errV5Refused)
		return false, err
	}
	// Commands and STATE are taken on a goroutine of their own: taking
	// one needs s.mu, which a QoS 1 publish waiting for its PUBACK (read
	// by serve) may hold.
	msgs := make(chan [2][]byte, 64)
	go func() {
		for {
			select {
			case m := <-msgs:
				s.onMessage(string(m[0]), m[1])
			case <-l.Done():
				return
			}
		}
	}()
	go l.serve(func(topic string, payload []byte) {
		select {
		case msgs <- [2][]byte{[]byte(topic), payload}:
		case <-l.Done():
		}
	})
	lost := make(chan struct{})
	var once sync.Once
	end := func() { once.Do(func() { close(lost) }) }
	if err := l.subscribe(s.node.Subscriptions()); err != nil {
		s.log.Warn("sparkplug: subscribe failed", "broker", s.opts.Broker, "err", err)
		end()
	} else {
		s.mu.Lock()
		s.client, s.lost = link5Conn{l, s.log}, end
		s.connected(bd, 5)
		s.mu.Unlock()
	}
	select {
	case <-l.Done():
		s.log.Warn("sparkplug: connection lost", "broker", s.opts.Broker, "err", l.Err())
	case <-lost:
	case <-s.closing:
		s.mu.Lock()
		if s.client != nil {
			s.do(s.node.Death(time.Now().UnixMilli()))
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.node.Disconnected()
	s.client, s.lost = nil, nil
	s.mu.Unlock()
	l.disconnect()
	return true, nil
}

// onMessage takes the node's NCMD and the primary host's STATE.
func (s *Sink) onMessage(topic string, payload []byte) {
	t, err := ParseTopic(topic)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UnixMilli()
	var acts []Action
	if t.Type == STATE {
		acts, err = s.node.HostState(payload, now)
	} else {
		acts, err = s.node.Command(payload, now)
	}
	if err != nil {
		s.log.Warn("sparkplug: message ignored", "topic", topic, "err", err)
		return
	}
	s.do(acts)
	s.sendHeld(now)
}
