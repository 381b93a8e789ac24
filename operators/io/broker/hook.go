package broker

import (
	"crypto/subtle"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// hook connects mochi to Eddy: it authenticates clients and hands every
// publish to the subscribers before mochi acknowledges it.
type hook struct {
	mqtt.HookBase
	server   *mqtt.Server
	subs     *subscribers
	log      *slog.Logger
	username []byte // nil: allow every client
	acls     []ACL
	password []byte
	// internalPassword is the secret of the internal listener's clients
	// (Broker.Internal).
	internalPassword []byte
	rejected         atomic.Uint64
	tooLarge         atomic.Uint64
	// refused counts the clients' refusals by reason (see Refusal).
	refused [numRefusals]atomic.Uint64
	// lines bounds the log lines of refusals, by reason.
	lines *lineLimiter
	// limits holds the clients' publish rates (Options.MaxMessagesPerSecond),
	// nil without a limit; throttled counts the publishes it delayed.
	limits    *rateLimits
	throttled atomic.Uint64
	stop      chan struct{} // closed by Broker.Close: waits end
	// maxPayload bounds a payload (Options.MaxMessageSize); maxPacket is
	// mochi's packet limit, told to MQTT 5 clients in the CONNACK.
	maxPayload   int
	maxPacket    uint32
	maxKeepAlive uint16        // seconds
	opened       chan struct{} // closed by Broker.Open
	openOnce     sync.Once

	// reinjected holds the deferred publishes being handed back to mochi
	// (see deferPublish): OnPublish lets them through untouched.
	mu         sync.Mutex
	reinjected map[reinjectKey]struct{}
	pool       sync.Pool // *deferredPublish
}

// reinjectKey names a publish by client and packet id: the id stays in use
// until the PUBACK, which mochi writes after OnPublish, so it is unique.
type reinjectKey struct {
	cl *mqtt.Client
	id uint16
}

func (h *hook) ID() string { return "eddy" }

func (h *hook) Provides(b byte) bool {
	return b == mqtt.OnConnect || b == mqtt.OnConnectAuthenticate || b == mqtt.OnACLCheck || b == mqtt.OnPublish ||
		b == mqtt.OnPacketEncode || b == mqtt.OnDisconnect || b == mqtt.OnPacketRead || b == mqtt.OnSubscribe
}

// OnDisconnect drops the client's rate bucket. A connection that ended
// because the client sent a packet over mochi's packet limit (cut off from
// its fixed header, unread) is counted as too large and logged with the
// client: mochi itself says only "packet too large".
func (h *hook) OnDisconnect(cl *mqtt.Client, err error, expire bool) {
	if h.limits != nil {
		h.limits.forget(cl)
	}
	if errors.Is(err, packets.ErrPacketTooLarge) {
		n := h.tooLarge.Add(1)
		h.logLimited("too_large", "broker: packet over the broker's packet limit refused; client disconnected",
			"client", cut(cl.ID), "identity", cut(identity(cl)), "remote", cl.Net.Remote,
			"max_packet_bytes", h.maxPacket, "max_message_size", h.maxPayload, "too_large_total", n)
	}
}

// logLimited logs a warning of kind through the hook's line limiter; the
// lines it held back since the last one are reported as suppressed.
func (h *hook) logLimited(kind, msg string, args ...any) {
	ok, suppressed := h.lines.allow(kind)
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	h.log.Warn(msg, args...)
}

// OnConnect holds the client's keepalive to maxKeepAlive: one of 0 (none)
// would keep a vanished client's connection, and its slot, forever.
func (h *hook) OnConnect(cl *mqtt.Client, pk packets.Packet) error {
	if ka := cl.State.Keepalive; ka == 0 || ka > h.maxKeepAlive {
		cl.State.Keepalive, cl.State.ServerKeepalive = h.maxKeepAlive, true
	}
	return nil
}

// OnPacketEncode tells MQTT 5 clients the broker's packet limit in the
// CONNACK (mochi enforces it but does not say so), so a conforming client
// never sends a packet beyond it.
func (h *hook) OnPacketEncode(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if pk.FixedHeader.Type == packets.Connack && pk.ReasonCode == 0 {
		pk.Properties.MaximumPacketSize = h.maxPacket
	}
	return pk
}

// OnConnectAuthenticate waits until the broker is open (Options.Closed),
// then allows exactly the configured credentials, compared in constant
// time, or every client when none are configured; on the internal
// listener, exactly the internal credentials.
func (h *hook) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	select {
	case <-h.opened:
	default:
		t := time.NewTimer(ClosedWait)
		defer t.Stop()
		select {
		case <-h.opened:
		case <-t.C:
			h.logLimited("closed", "broker: connection refused: the broker did not open in time",
				"client", cut(cl.ID), "remote", cl.Net.Remote, "waited", ClosedWait.String())
			return false
		}
	}
	var ok bool
	switch {
	case internal(cl):
		ok = credentialsMatch(pk, []byte(InternalUsername), h.internalPassword)
	case h.username == nil:
		return true
	default:
		ok = credentialsMatch(pk, h.username, h.password)
	}
	if !ok {
		n := h.refused[RefusedCredentials].Add(1)
		h.logLimited(RefusedCredentials.String(), "broker: connection refused: wrong username or password",
			"client", cut(cl.ID), "username", cut(string(pk.Connect.Username)), "remote", cl.Net.Remote,
			"listener", cl.Net.Listener, "refused_total", n)
	}
	return ok
}

// credentialsMatch compares pk's username and password with username and
// password, in constant time.
func credentialsMatch(pk packets.Packet, username, password []byte) bool {
	userOK := subtle.ConstantTimeCompare(pk.Connect.Username, username) == 1
	passOK := subtle.ConstantTimeCompare(pk.Connect.Password, password) == 1
	return userOK && passOK
}

// internal reports whether cl came through the internal listener (and so,
// once connected, holds the internal credentials).
func internal(cl *mqtt.Client) bool { return cl.Net.Listener == internalListenerID }

// OnPublish runs the subscribers before mochi acknowledges the publish. A
// QoS 1 publish whose only subscriber is deferred is taken out of mochi's
// hands instead (rejected, so mochi neither acks nor routes it) and handed
// back once the subscriber is done: the sensor's next packets are read
// meanwhile, so one connection can have many publishes in one commit.
func (h *hook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if h.takeReinjected(cl, pk) {
		return pk, nil
	}
	if len(pk.Payload) > h.maxPayload && !cl.Net.Inline {
		n := h.tooLarge.Add(1)
		h.logLimited("too_large", "broker: publish larger than max_message_size refused; client disconnected",
			"client", cut(cl.ID), "topic", cut(pk.TopicName), "bytes", len(pk.Payload), "max_message_size", h.maxPayload, "too_large_total", n)
		h.disconnect(cl, packets.ErrPacketTooLarge)
		return pk, packets.ErrRejectPacket
	}
	if h.limits != nil && !cl.Net.Inline {
		h.throttle(cl, pk)
	}
	if pk.FixedHeader.Qos < 2 && !pk.FixedHeader.Retain && !cl.Net.Inline {
		if sub := h.subs.only(pk.TopicName); sub != nil && sub.deferred != nil {
			if pk.FixedHeader.Qos == 0 {
				// Nothing acknowledges a QoS 0 publish, so waiting for the
				// commit would promise the sensor nothing and only hold its
				// connection to one message per commit. It is queued and
				// routed at once; the queue's bound is its backpressure.
				sub.deferred(pk.TopicName, append([]byte(nil), pk.Payload...), false, (*qos0Done)(h))
				return pk, nil
			}
			h.deferPublish(cl, pk, sub.deferred)
			return pk, packets.ErrRejectPacket
		}
	}
	err := h.subs.deliver(pk.TopicName, pk.Payload, pk.FixedHeader.Dup)
	if err == nil {
		return pk, nil
	}
	h.reject(cl, pk, err)
	return pk, packets.ErrRejectPacket
}

// throttle holds a client over its publish rate back: its connection's
// read loop waits here until the publish is within the rate, so its next
// packets stay in the socket and TCP slows the sender down. Nothing is
// lost or refused: a burst beyond the budget (a sensor emptying its buffer
// after an outage) is spread out; a flooding client gets its rate and no
// more, and the others are not slowed.
func (h *hook) throttle(cl *mqtt.Client, pk packets.Packet) {
	b, wait, first := h.limits.delay(cl)
	if wait == 0 {
		return
	}
	n := h.throttled.Add(1)
	if first {
		h.log.Warn("broker: client over max_messages_per_second; its publishes are delayed to the rate",
			"client", cl.ID, "topic", pk.TopicName, "max_messages_per_second", h.limits.rate, "throttled_total", n)
	}
	b.sleep(wait, h.stop)
}

// reject counts and logs a refused publish and, for QoS 1/2, closes the
// connection: no acknowledgement goes out, and closing makes the sensor
// re-send the message when it reconnects instead of waiting for a PUBACK
// forever. MQTT 3.1.1 has no server DISCONNECT packet.
func (h *hook) reject(cl *mqtt.Client, pk packets.Packet, err error) {
	n := h.rejected.Add(1)
	h.log.Warn("broker: publish rejected by subscriber",
		"client", cl.ID, "topic", pk.TopicName, "qos", pk.FixedHeader.Qos, "rejected_total", n, "error", err)
	if pk.FixedHeader.Qos > 0 {
		h.disconnect(cl, packets.ErrImplementationSpecificError)
	}
}

// disconnect closes cl's connection, with a DISCONNECT carrying code for
// MQTT 5 (3.1.1 has no server DISCONNECT).
func (h *hook) disconnect(cl *mqtt.Client, code packets.Code) {
	if cl.Properties.ProtocolVersion == 5 {
		_ = h.server.DisconnectClient(cl, code)
	} else {
		cl.Stop(code)
	}
}

// qos0Done completes a queued QoS 0 publish: a failed commit drops it,
// counted and logged as a rejected publish (the sensor, which expects no
// acknowledgement, is not disconnected).
type qos0Done hook

func (d *qos0Done) Done(err error) {
	if err == nil {
		return
	}
	h := (*hook)(d)
	n := h.rejected.Add(1)
	h.log.Warn("broker: QoS 0 publish dropped: its subscriber failed", "rejected_total", n, "error", err)
}

// deferredPublish is a QoS 1 publish held until its subscriber is done.
type deferredPublish struct {
	h  *hook
	cl *mqtt.Client
	pk packets.Packet
}

func (h *hook) deferPublish(cl *mqtt.Client, pk packets.Packet, fn DeferredFunc) {
	d, _ := h.pool.Get().(*deferredPublish)
	if d == nil {
		d = &deferredPublish{h: h}
	}
	// The topic alias is resolved already; the re-injected packet must not
	// set it again from another goroutine.
	pk.Properties.TopicAlias, pk.Properties.TopicAliasFlag = 0, false
	pk.Payload = append([]byte(nil), pk.Payload...) // the subscriber and the re-injection keep it
	d.cl, d.pk = cl, pk
	fn(pk.TopicName, pk.Payload, pk.FixedHeader.Dup, d)
}

// Done hands the publish back to mochi, which acknowledges it (PUBACK) and
// routes it to MQTT subscribers as if the hook had just returned, or
// rejects it.
func (d *deferredPublish) Done(err error) {
	h, cl, pk := d.h, d.cl, d.pk
	d.cl, d.pk = nil, packets.Packet{}
	h.pool.Put(d)
	if err != nil {
		h.reject(cl, pk, err)
		return
	}
	if cl.Closed() {
		return // the sensor re-sends it, marked DUP, after reconnecting
	}
	key := reinjectKey{cl, pk.PacketID}
	h.mu.Lock()
	if h.reinjected == nil {
		h.reinjected = make(map[reinjectKey]struct{})
	}
	h.reinjected[key] = struct{}{}
	h.mu.Unlock()
	if err := h.server.InjectPacket(cl, pk); err != nil {
		h.log.Debug("broker: acknowledging a deferred publish failed", "client", cl.ID, "error", err)
	}
	h.mu.Lock()
	delete(h.reinjected, key) // normally taken by OnPublish already
	h.mu.Unlock()
}

// takeReinjected reports whether pk is a deferred publish being handed back.
func (h *hook) takeReinjected(cl *mqtt.Client, pk packets.Packet) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.reinjected) == 0 {
		return false
	}
	key := reinjectKey{cl, pk.PacketID}
	if _, ok := h.reinjected[key]; !ok {
		return false
	}
	delete(h.reinjected, key)
	return true
}
