package sparkplug

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
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
	// MaxHeld bounds the results kept while the births are not out (the
	// broker or the primary host away); beyond it the oldest are dropped
	// and counted. 0 means 10,000.
	MaxHeld int
	// MaxRetryInterval caps the backoff between connection attempts, which
	// starts at 1 s. 0 means 10 s: a host shows the node offline until it
	// is back, so it retries sooner than the MQTT sink's minute.
	MaxRetryInterval time.Duration
	Log              *slog.Logger
}

// Sink publishes window results as a Sparkplug B edge node: each result's
// key is a device, its aggregates the device's metrics. It drives a Node
// over one paho connection at a time, a new client per connection so that
// each CONNECT registers the NDEATH of its own bdSeq as its will.
//
// Results written while the births are not out are held in memory, in
// order, and published after the next births with is_historical set; they
// do not survive a restart (docs/upstream.md says what that means for the
// guarantee). Sink is safe for concurrent use.
type Sink struct {
	opts    SinkOptions
	log     *slog.Logger
	closing chan struct{}
	done    chan struct{}

	mu     sync.Mutex // guards node, client, lost, held and closed
	node   *Node
	client paho.Client
	lost   func() // ends the current connection (once)
	held   []heldResult
	closed bool
	// decoded reads results that reach the sink as JSON only.
	decoded resultJSON

	published, historical, dropped atomic.Uint64

	// unsent is a bdSeq reserved by NextBdSeq whose CONNECT never went out
	// (the broker could not be reached): the next attempt takes it, so
	// bdSeq grows by one per CONNECT, as the specification counts. Only
	// run's goroutine uses it.
	unsent    uint64
	hasUnsent bool
}

// heldResult is a result kept while the node is not born.
type heldResult struct {
	key    []byte
	names  []string // the pipeline's aggregate names, which outlive the result
	values []float64
	tsMs   int64
}

// SinkStats counts what a Sink did.
type SinkStats struct {
	Published  uint64 // DDATA messages handed to the connection
	Historical uint64 // of those, held results sent after a (re)birth
	Dropped    uint64 // held results dropped beyond MaxHeld
	Held       int    // results held now
	Born       bool   // the births of the current connection are out
	BdSeq      uint64 // of the current or last connection
}

const (
	defaultMaxHeld          = 10000
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
	if opts.MaxHeld <= 0 {
		opts.MaxHeld = defaultMaxHeld
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
	s := &Sink{opts: opts, log: log, node: n, closing: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s, nil
}

// Stats returns the counters.
func (s *Sink) Stats() SinkStats {
	s.mu.Lock()
	held, born, bd := len(s.held), s.node.Born(), s.node.BdSeq()
	s.mu.Unlock()
	return SinkStats{Published: s.published.Load(), Historical: s.historical.Load(), Dropped: s.dropped.Load(), Held: held, Born: born, BdSeq: bd}
}

// ErrClosed is returned by a Sink's methods after Close.
var ErrClosed = errors.New("sparkplug: sink closed")

// Write publishes each result as its device's DDATA (after its DBIRTH),
// or holds it while the node is not born. It does not wait for the
// broker: data messages are QoS 0.
func (s *Sink) Write(items []record.Item) error {
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
		if len(s.held) == 0 {
			if acts, ok := s.node.Result(r.Key, r.Names, r.Values, r.End, false, now); ok {
				if s.do(acts) {
					s.published.Add(1)
					continue
				}
				// paho knew the connection was gone before this sink did:
				// keep the result for the next session.
				s.endSession()
			}
		}
		s.hold(r)
	}
	return nil
}

// hold keeps r for the next births, dropping the oldest beyond MaxHeld.
func (s *Sink) hold(r *record.Result) {
	if len(s.held) >= s.opts.MaxHeld {
		n := copy(s.held, s.held[1:])
		s.held = s.held[:n]
		if s.dropped.Add(1) == 1 {
			s.log.Warn("sparkplug: results held while the node is not born exceed the bound: dropping the oldest", "max_held", s.opts.MaxHeld)
		}
	}
	s.held = append(s.held, heldResult{key: append([]byte(nil), r.Key...), names: r.Names,
		values: append([]float64(nil), r.Values...), tsMs: r.End})
}

// sendHeld publishes the held results as historical once the node is
// born, oldest first, before anything newer.
func (s *Sink) sendHeld(now int64) {
	for len(s.held) > 0 && s.node.Born() {
		h := &s.held[0]
		acts, ok := s.node.Result(h.key, h.names, h.values, h.tsMs, true, now)
		if !ok {
			return
		}
		if !s.do(acts) {
			s.endSession()
			return
		}
		s.published.Add(1)
		s.historical.Add(1)
		s.held[0] = heldResult{}
		s.held = s.held[1:]
	}
	if len(s.held) == 0 {
		s.held = nil
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
	if n := len(s.held); n > 0 {
		s.log.Warn("sparkplug: results held and never published: the node was not born (broker or primary host away) when the sink closed",
			"held", n, "broker", s.opts.Broker)
	}
	s.mu.Unlock()
	close(s.closing)
	<-s.done
	return nil
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

// do performs a Node's actions on the current connection; s.mu is held.
// It reports false when a publish failed at once (paho already knows the
// connection is gone): the caller keeps the result it was for. A QoS 0
// publish written to a connection that only later proves dead is lost
// unnoticed, as QoS 0 is.
func (s *Sink) do(acts []Action) bool {
	for _, a := range acts {
		switch a.Kind {
		case Publish:
			if s.client == nil {
				return false
			}
			// paho keeps the payload until it is written; the Node reuses
			// its buffer at the next call.
			tok := s.client.Publish(a.Topic, a.QoS, a.Retain, append([]byte(nil), a.Payload...))
			if a.QoS > 0 {
				if !tok.WaitTimeout(publishTimeout) || tok.Error() != nil {
					s.log.Warn("sparkplug: publish failed", "topic", a.Topic, "err", tok.Error())
				}
				continue
			}
			select {
			case <-tok.Done():
				if tok.Error() != nil {
					return false
				}
			default:
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
	// Set when the socket could not be opened: no CONNECT (and no will)
	// went out with bd.
	var openFailed atomic.Bool
	lost := make(chan struct{})
	var once sync.Once
	end := func() { once.Do(func() { close(lost) }) }
	s.mu.Lock()
	will := s.node.Connect(bd, time.Now().UnixMilli())
	s.mu.Unlock()
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
		SetBinaryWill(will.Topic, append([]byte(nil), will.Payload...), will.QoS, will.Retain).
		SetConnectionLostHandler(func(_ paho.Client, err error) {
			s.log.Warn("sparkplug: connection lost", "broker", s.opts.Broker, "err", err)
			end()
		}).
		SetDefaultPublishHandler(s.onMessage)
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
		s.client, s.lost = c, end
		now := time.Now().UnixMilli()
		s.do(s.node.Connected(now))
		s.sendHeld(now)
		s.log.Info("sparkplug: connected", "broker", s.opts.Broker, "bdSeq", bd, "born", s.node.Born())
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
		s.client = c
		s.do(s.node.Death(time.Now().UnixMilli()))
		s.client, s.lost = nil, nil
		s.mu.Unlock()
		c.Disconnect(disconnectQuiesceMillis)
	}
	return true, nil
}

// onMessage takes the node's NCMD and the primary host's STATE.
func (s *Sink) onMessage(_ paho.Client, m paho.Message) {
	t, err := ParseTopic(m.Topic())
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UnixMilli()
	var acts []Action
	if t.Type == STATE {
		acts, err = s.node.HostState(m.Payload(), now)
	} else {
		acts, err = s.node.Command(m.Payload(), now)
	}
	if err != nil {
		s.log.Warn("sparkplug: message ignored", "topic", m.Topic(), "err", err)
		return
	}
	s.do(acts)
	s.sendHeld(now)
}
