package broker

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// ErrInsecureListen is returned by Start for a listen address beyond
// loopback without credentials or verified client certificates.
var ErrInsecureListen = errors.New("broker: a listener beyond loopback requires username and password, or TLS with client certificates")

// DefaultListen is the listen address used when Options.Listen is empty.
const DefaultListen = "127.0.0.1:1883"

// DefaultMaxInflight is Options.MaxInflight's default.
const DefaultMaxInflight = 1000

// Defaults of the connection bounds in Options.
const (
	DefaultMaxMessageSize = 256 << 10
	DefaultMaxClients     = 1000
	DefaultMaxKeepAlive   = 5 * time.Minute
)

// publishOverhead is what a PUBLISH packet holds besides its payload, at
// most: a topic of up to 65535 bytes with its length, the packet id, and
// MQTT 5 properties. The packet limit is the message limit plus this, so
// mochi refuses a packet beyond it from its fixed header, before reading
// (allocating) the body; the hook then holds the payload to the exact
// limit.
const publishOverhead = 64<<10 + 1<<10

// Options configures the embedded broker.
type Options struct {
	// Listen is the TCP address, host:port; port 0 picks a free port (see
	// Broker.Addr). Default DefaultListen. A host other than a loopback
	// address or "localhost" (including an empty host, which binds every
	// interface) requires Username and Password, or a TLS config that
	// requires and verifies client certificates.
	Listen string
	// Username and Password, when set, are the only credentials accepted
	// (compared in constant time). Both empty: every client is accepted.
	Username, Password string
	// TLS, when set, makes the listener accept TLS connections only. With
	// ClientAuth tls.RequireAndVerifyClientCert and ClientCAs, only clients
	// holding a certificate issued by one of those CAs complete the
	// handshake; TLS without client certificates only encrypts.
	TLS *tls.Config
	// MaxInflight is the number of QoS 1/2 messages the broker keeps
	// unacknowledged towards one MQTT subscriber (as mosquitto's
	// max_inflight_messages); more are dropped for that subscriber and
	// counted by mochi. Default DefaultMaxInflight; at most 65535. It does
	// not limit publishers: their QoS 1/2 flows are never refused for being
	// too many (mochi's default of 1024 disconnects a fast QoS 2 publisher).
	MaxInflight int
	// MaxMessageSize bounds a published payload, in bytes. A client that
	// sends more is disconnected (MQTT 5: DISCONNECT with reason 0x95,
	// packet too large; the CONNACK tells MQTT 5 clients the packet limit)
	// and its message is not taken; other clients are not affected. Default
	// DefaultMaxMessageSize.
	MaxMessageSize int
	// MaxClients bounds the clients connected at once; one more is refused
	// in its CONNACK (server unavailable / busy). Default
	// DefaultMaxClients.
	MaxClients int
	// MaxKeepAlive is the longest keepalive a client gets: one asking for
	// more, or for none (0), is held to it, so a vanished client's
	// connection is dropped after 1.5 times it (MQTT 5 clients are told in
	// the CONNACK). Default DefaultMaxKeepAlive.
	MaxKeepAlive time.Duration
	// MaxMessagesPerSecond, when positive, bounds each client
	// connection's publishes: a token bucket of MaxMessagesBurst (default
	// one second's worth) refilled at this rate. A publish beyond it is
	// delayed, not refused: the connection's reading waits until it is
	// within the rate, so TCP slows the sender down and nothing is lost.
	// 0: unlimited.
	MaxMessagesPerSecond, MaxMessagesBurst int
	// ACLs, when any, bound what each client may publish and subscribe to
	// (see ACL); without any, every client may publish everywhere and
	// subscribe to everything but $SYS.
	ACLs []ACL
	// Closed makes the broker hold every client's CONNACK until Open is
	// called (for up to ClosedWait, then it refuses the connection), so no
	// publish arrives before the subscribers are in place: one matching no
	// subscriber would be acknowledged and go nowhere.
	Closed bool
}

// ACL bounds what one client may do: publish to the topics matching
// Publish, and subscribe to the filters Subscribe covers. Both are MQTT
// filters in which usernameVar stands for the client's identity, so
// "sensors/${username}/#" keeps each sensor to its own subtree. A client's
// identity is the common name of its certificate when the listener
// verifies client certificates, else its MQTT username. User "*" applies
// to every client without an ACL of its own; a client with neither may
// neither publish nor subscribe. A subscription is allowed when one of
// Subscribe matches every topic it could (so "#" is refused to a client
// allowed "sensors/${username}/#"), and every message delivered on it is
// checked again; topics starting with '$' ($SYS) are open only to a filter
// naming them ("$SYS/#"), never through a leading wildcard.
type ACL struct {
	User      string
	Publish   []string
	Subscribe []string
}

// usernameVar is the identity placeholder in ACL filters.
const usernameVar = "${username}"

// ClosedWait is how long a connection waits for Open before it is refused;
// below common connect timeouts (paho: 30 s).
const ClosedWait = 10 * time.Second

// Broker is a running embedded broker. Its methods are safe for concurrent
// use.
type Broker struct {
	server    *mqtt.Server
	listener  *listeners.TCP
	internal  *listeners.TCP // see Internal
	subs      *subscribers
	hook      *hook
	panics    atomic.Uint64
	closeOnce sync.Once
	log       *slog.Logger
	// closing makes the listener drop new connections once Close has
	// begun (mochi closes the socket only after every client is gone).
	closing atomic.Bool
	// closeServer is server.Close; closeTimeout bounds the wait for it.
	closeServer  func() error
	closeTimeout time.Duration
}

// CloseTimeout bounds Broker.Close's wait for mochi to disconnect every
// client.
const CloseTimeout = 5 * time.Second

// containedListener is mochi's TCP listener with each connection's
// handling made to end in an error instead of a panic, its TLS handshake
// done (and its failure counted) before mochi sees the connection, and the
// refusals the hook logs itself kept out of mochi's log.
//
// Panics: mochi 2.7.9 panics decoding some malformed packets (an MQTT 5
// SUBSCRIBE whose last filter lacks its options byte indexes past the
// packet), in the connection's own goroutine, where nothing recovers: any
// client on the network could stop the agent. Here the panic ends that
// connection only (mochi's deferred clean-up runs), is logged and counted.
//
// Errors: mochi's listener logs every connection's error with the error
// only, no client; those the hook logs with the client (wrong credentials,
// an acl refusal, a packet over the limit) are not passed on.
type containedListener struct {
	*listeners.TCP
	hook    *hook
	panics  *atomic.Uint64
	closing *atomic.Bool
}

// handshakeTimeout bounds a TLS handshake before mochi reads the CONNECT.
const handshakeTimeout = 10 * time.Second

func (l *containedListener) Serve(establish listeners.EstablishFn) {
	h := l.hook
	l.TCP.Serve(func(id string, c net.Conn) (err error) {
		defer func() {
			if r := recover(); r != nil {
				n := l.panics.Add(1)
				h.log.Warn("broker: a client's packet crashed its connection's handling; connection closed",
					"remote", c.RemoteAddr().String(), "panic", cut(fmt.Sprint(r)), "contained_total", n)
				_ = c.Close()
				err = fmt.Errorf("broker: connection handling panicked: %v", r)
			}
		}()
		if l.closing.Load() {
			_ = c.Close()
			return nil
		}
		if tc, ok := c.(*tls.Conn); ok && !h.handshake(tc) {
			return nil
		}
		err = establish(id, c)
		switch {
		case err == error(packets.ErrPacketTooLarge), errors.Is(err, packets.ErrNotAuthorized),
			errors.Is(err, packets.ErrBadUsernameOrPassword):
			return nil // logged by the hook, naming the client
		case errors.Is(err, packets.ErrPacketTooLarge):
			// A CONNECT over the limit: no client yet (attached clients'
			// come back unwrapped and are the hook's, in OnDisconnect).
			n := h.tooLarge.Add(1)
			h.logLimited("too_large", "broker: connect packet over the broker's packet limit refused",
				"remote", c.RemoteAddr().String(), "max_packet_bytes", h.maxPacket, "too_large_total", n)
			return nil
		}
		return err
	})
}

// handshake completes tc's TLS handshake within handshakeTimeout and
// reports whether it succeeded; a failure (no client certificate, one of
// another CA, not TLS) is counted as a refusal and logged, rate limited,
// and the connection closed. A connection closed before its first byte (a
// port probe) is neither.
func (h *hook) handshake(tc *tls.Conn) bool {
	_ = tc.SetDeadline(time.Now().Add(handshakeTimeout))
	err := tc.Handshake()
	_ = tc.SetDeadline(time.Time{})
	if err == nil {
		return true
	}
	_ = tc.Close()
	if errors.Is(err, io.EOF) {
		return false
	}
	n := h.refused[RefusedTLS].Add(1)
	h.logLimited(RefusedTLS.String(), "broker: connection refused: TLS handshake failed",
		"remote", tc.RemoteAddr().String(), "error", cut(err.Error()), "reason", RefusedTLS.String(), "refused_total", n)
	return false
}

// Check reports what Start would refuse in o, without listening.
func (o Options) Check() error { return o.normalize() }

// normalize applies the defaults and validates o.
func (o *Options) normalize() error {
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.MaxInflight == 0 {
		o.MaxInflight = DefaultMaxInflight
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.MaxClients == 0 {
		o.MaxClients = DefaultMaxClients
	}
	if o.MaxKeepAlive == 0 {
		o.MaxKeepAlive = DefaultMaxKeepAlive
	}
	if o.MaxMessageSize < 0 || o.MaxMessageSize > 256<<20-publishOverhead {
		return fmt.Errorf("broker: max message size %d out of range", o.MaxMessageSize)
	}
	if o.MaxClients < 0 || o.MaxKeepAlive < time.Second || o.MaxKeepAlive > 65535*time.Second {
		return fmt.Errorf("broker: max clients %d or max keepalive %v out of range", o.MaxClients, o.MaxKeepAlive)
	}
	for _, acl := range o.ACLs {
		for _, f := range append(acl.Publish[:len(acl.Publish):len(acl.Publish)], acl.Subscribe...) {
			if err := ValidateFilter(strings.ReplaceAll(f, usernameVar, "u")); err != nil {
				return fmt.Errorf("broker: acl for %q: %w", acl.User, err)
			}
		}
	}
	if o.MaxMessagesPerSecond > 0 && o.MaxMessagesBurst == 0 {
		o.MaxMessagesBurst = o.MaxMessagesPerSecond
	}
	if o.MaxMessagesPerSecond < 0 || o.MaxMessagesBurst < 0 || (o.MaxMessagesBurst > 0 && o.MaxMessagesPerSecond == 0) {
		return fmt.Errorf("broker: max messages per second %d or burst %d out of range", o.MaxMessagesPerSecond, o.MaxMessagesBurst)
	}
	if o.MaxInflight < 0 || o.MaxInflight > 65535 {
		return fmt.Errorf("broker: max inflight %d out of range 1..65535", o.MaxInflight)
	}
	if o.Username == "" && o.Password != "" {
		return errors.New("broker: a password is set without a username")
	}
	loopback, err := isLoopback(o.Listen)
	if err != nil {
		return err
	}
	if !loopback && !verifiesClients(o.TLS) && (o.Username == "" || o.Password == "") {
		return fmt.Errorf("%w (listen %q)", ErrInsecureListen, o.Listen)
	}
	return nil
}

// Start validates opts, binds the listener and starts serving. log receives
// the broker's own warnings and errors (mochi's info and debug lines are
// dropped). The caller must Close the broker.
func Start(opts Options, log *slog.Logger) (*Broker, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := opts.normalize(); err != nil {
		return nil, err
	}

	caps := mqtt.NewDefaultServerCapabilities()
	caps.ReceiveMaximum = 65535 // publisher flows in progress per client; see MaxInflight
	caps.MaximumInflight = uint16(opts.MaxInflight)
	caps.MaximumClientWritesPending = 16 * 1024 // outbound queue per client before drops
	caps.MaximumPacketSize = uint32(opts.MaxMessageSize + publishOverhead)
	caps.MaximumClients = int64(opts.MaxClients)
	// mochi's logger goes through a filter: see mochiHandler.
	mochiLog := slog.New(mochiHandler{min: slog.LevelWarn, next: log.With("component", "mochi").Handler(), limit: newLineLimiter()})
	server := mqtt.New(&mqtt.Options{
		Capabilities:             caps,
		ClientNetWriteBufferSize: 32 * 1024,
		ClientNetReadBufferSize:  32 * 1024,
		Logger:                   mochiLog,
	})
	b := &Broker{server: server, subs: &subscribers{}, log: log, closeServer: server.Close, closeTimeout: CloseTimeout}
	b.hook = &hook{server: server, subs: b.subs, log: log, lines: newLineLimiter(), opened: make(chan struct{}), stop: make(chan struct{}),
		acls: opts.ACLs, maxPayload: opts.MaxMessageSize, maxPacket: caps.MaximumPacketSize, maxKeepAlive: uint16(opts.MaxKeepAlive / time.Second)}
	if opts.MaxMessagesPerSecond > 0 {
		b.hook.limits = newRateLimits(opts.MaxMessagesPerSecond, opts.MaxMessagesBurst)
	}
	if !opts.Closed {
		b.Open()
	}
	if opts.Username != "" {
		b.hook.username = []byte(opts.Username)
		b.hook.password = []byte(opts.Password)
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret) // crypto/rand.Read does not fail (Go ≥ 1.24)
	b.hook.internalPassword = []byte(hex.EncodeToString(secret))
	if err := server.AddHook(b.hook, nil); err != nil {
		return nil, fmt.Errorf("broker: add hook: %w", err)
	}
	b.listener = listeners.NewTCP(listeners.Config{ID: "eddy", Address: opts.Listen, TLSConfig: opts.TLS})
	if err := server.AddListener(&containedListener{TCP: b.listener, hook: b.hook, panics: &b.panics, closing: &b.closing}); err != nil {
		return nil, fmt.Errorf("broker: listen on %s: %w", opts.Listen, err)
	}
	b.internal = listeners.NewTCP(listeners.Config{ID: internalListenerID, Address: "127.0.0.1:0"})
	if err := server.AddListener(&containedListener{TCP: b.internal, hook: b.hook, panics: &b.panics, closing: &b.closing}); err != nil {
		_ = server.Close()
		return nil, fmt.Errorf("broker: internal listener on 127.0.0.1: %w", err)
	}
	if err := server.Serve(); err != nil {
		_ = server.Close()
		return nil, fmt.Errorf("broker: serve: %w", err)
	}
	log.Info("embedded broker listening", "addr", b.Addr(), "tls", opts.TLS != nil, "auth", opts.Username != "")
	return b, nil
}

// verifiesClients reports whether tc lets in only clients with a verified
// certificate.
func verifiesClients(tc *tls.Config) bool {
	return tc != nil && tc.ClientAuth == tls.RequireAndVerifyClientCert && tc.ClientCAs != nil
}

// isLoopback reports whether the host of a host:port address is a loopback
// address or "localhost". An empty host binds every interface: not loopback.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("broker: listen address %q: %w", addr, err)
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// Addr returns the address the broker listens on, with the actual port when
// Options.Listen asked for port 0.
func (b *Broker) Addr() string { return b.listener.Address() }

// URL returns the broker's address as an MQTT client URL ("tcp://" + Addr).
func (b *Broker) URL() string { return "tcp://" + b.Addr() }

// internalListenerID names the internal listener (see Internal); mochi
// gives every client the id of the listener it came through.
const internalListenerID = "eddy-internal"

// InternalUsername is the username of the agent's own clients on the
// internal listener.
const InternalUsername = "eddy-internal"

// Endpoint is what an MQTT client needs to reach the broker.
type Endpoint struct {
	URL, Username, Password string
}

// Internal is where the agent's own clients (its MQTT sinks and
// simulators) connect: a second listener, plain TCP on 127.0.0.1 with a
// port of its own, that lets in only clients presenting InternalUsername
// and a password made at random by Start, held in memory and never
// logged. Clients that got in through it may publish anywhere (no ACL
// applies: their topics are the configuration's own); the message size and
// rate limits apply as on the main listener.
//
// Why not the main listener: with TLS and a client CA it lets in only
// certificates of the operator's CA, and the agent holds none (its server
// certificate need not be valid for client authentication); with a
// username and password its clients would need the sensors' credentials
// and the ACLs would govern the agent's results. The internal listener
// serves every configuration alike, is not reachable from the network, and
// spends no TLS handshake or encryption on a connection that never leaves
// the device.
func (b *Broker) Internal() Endpoint {
	return Endpoint{URL: "tcp://" + b.internal.Address(), Username: InternalUsername, Password: string(b.hook.internalPassword)}
}

// Subscribe calls fn, synchronously in the broker's publish hook, for every
// message published on a topic matching one of filters (MQTT filter syntax
// with + and #; one call per message even when several filters match). fn
// runs before the publishing client is acknowledged; it may be called
// concurrently for messages of different clients, and in publish order for
// the messages of one client. topic and payload are valid only during the
// call. An error from fn rejects the publish (see the package doc). A
// message is offered to subscribers in subscription order, stopping at the
// first error.
//
// Subscribe panics on an invalid filter (a programming error: validate
// configured filters with ValidateFilter first); use the returned func to unsubscribe. After
// unsubscribe returns, fn is not called for messages whose hook starts later.
func (b *Broker) Subscribe(filters []string, fn func(topic string, payload []byte) error) (unsubscribe func()) {
	return b.subscribe(filters, fn, nil)
}

// SubscribeDeferred is Subscribe for a subscriber that acknowledges
// asynchronously (a group commit): fn gets each message with a Completion
// and the broker acknowledges the publish only when fn's Completion is
// done. A QoS 1 publish (not retained) that matches this subscriber and no
// other is taken out of the sensor connection's read loop meanwhile, so the
// sensor's further publishes arrive and can share one commit; PUBACKs still
// go out in the order received as long as fn completes in the order it is
// called. Such a QoS 0 publish, which has no acknowledgement to hold, is
// handed to fn and routed at once; a failed Completion drops it (counted in
// Rejected). Every other publish it matches (QoS 2, retained, several
// subscribers) waits in the hook, as with Subscribe. Filters are checked as
// for Subscribe.
func (b *Broker) SubscribeDeferred(filters []string, fn DeferredFunc) (unsubscribe func()) {
	return b.subscribe(filters, nil, fn)
}

func (b *Broker) subscribe(filters []string, fn SubscriberFunc, deferred DeferredFunc) (unsubscribe func()) {
	if len(filters) == 0 {
		panic("broker: Subscribe with no filters")
	}
	for _, f := range filters {
		if err := ValidateFilter(f); err != nil {
			panic(err)
		}
	}
	id := b.subs.add(filters, fn, deferred)
	var once sync.Once
	return func() { once.Do(func() { b.subs.remove(id) }) }
}

// Open lets clients in (see Options.Closed). Calling it again does
// nothing.
func (b *Broker) Open() { b.hook.openOnce.Do(func() { close(b.hook.opened) }) }

// Rejected returns how many publishes subscribers have rejected.
func (b *Broker) Rejected() uint64 { return b.hook.rejected.Load() }

// Panics returns how many connections ended in a contained panic of
// mochi's packet handling (see containedListener).
func (b *Broker) Panics() uint64 { return b.panics.Load() }

// TooLarge returns how many publishes were refused for exceeding
// MaxMessageSize, and how many packets for exceeding the packet limit (cut
// off by mochi from their fixed header, unread); their clients were
// disconnected.
func (b *Broker) TooLarge() uint64 { return b.hook.tooLarge.Load() }

// Throttled returns how many publishes were delayed for exceeding
// MaxMessagesPerSecond.
func (b *Broker) Throttled() uint64 { return b.hook.throttled.Load() }

// Close disconnects every client and stops the listener. It is safe to call
// more than once; later calls do nothing. It returns within CloseTimeout
// (plus the first call's own wait): mochi 2.7.9 can deadlock closing its
// listener (Clients.GetByListener takes a read lock twice while a
// disconnecting client waits for the write lock between them), and a
// shutdown must not hang on it. Past the timeout Close logs a warning and
// returns an error; mochi's goroutines are left blocked, new connections
// are closed as they arrive, and the listening socket may stay bound until
// the process exits.
func (b *Broker) Close() error {
	var err error
	b.closeOnce.Do(func() {
		b.closing.Store(true)
		close(b.hook.stop) // publishes waiting for their rate go on
		done := make(chan error, 1)
		go func() { done <- b.closeServer() }()
		t := time.NewTimer(b.closeTimeout)
		defer t.Stop()
		select {
		case cerr := <-done:
			if cerr != nil {
				err = fmt.Errorf("broker: close: %w", cerr)
			}
		case <-t.C:
			b.log.Warn("broker: closing the embedded broker did not finish; going on without it",
				"timeout", b.closeTimeout.String())
			err = fmt.Errorf("broker: close: not done after %v", b.closeTimeout)
		}
	})
	return err
}
