package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// SharedOptions configure the connections of a SharedMQTT source.
type SharedOptions struct {
	// Connections is the number of MQTT connections, at least 1. Each is
	// its own paho client with its own reader goroutine; the broker spreads
	// the messages of a shared subscription over them.
	Connections int
	// Group is the shared subscription group: every topic T is subscribed
	// as "$share/<Group>/T". It must be stable across restarts (the
	// persistent sessions hold the subscription) and must not contain
	// '/', '+' or '#'. Default: the ClientID, with those characters
	// replaced by '_'.
	Group string
}

// SharedMQTT reads from an MQTT broker over several connections that share
// one subscription group ($share/GROUP/TOPIC, MQTT 5 shared subscriptions,
// which mosquitto 2 also offers to MQTT 3.1.1 clients): the broker hands
// each message to one connection of the group, so the connections' reader
// goroutines (TCP read, packet decode, paho's handler) run in parallel.
//
// Connection i (0-based) uses client id "<ClientID>-<i>", a persistent
// session (unless CleanSession) and manual acks, exactly as an MQTT source:
// see MQTT for the reconnect loop and the never-blocking handler. Messages
// of all connections go through one queue, so
//
//   - Offsets are unique and increasing across connections, in the order
//     messages were queued;
//   - a batch may mix connections, and Message.Ack acks a message on the
//     connection it came from; acking in delivery order acks each
//     connection's messages in the order it received them, as MQTT 3.1.1
//     asks;
//   - the ingest log's guarantee is unchanged: the receiver appends a batch
//     before it acks any message of it, so every message is durable before
//     the broker drops it.
//
// Delivery is at least once, as for MQTT: after a connection is lost the
// broker redelivers its unacked messages, with DUP set, on the same
// client id's next connection. Order across connections is not kept: two
// messages of one sensor may arrive swapped when they went to different
// connections (bounded out-of-orderness absorbs it; on a loopback broker
// the swap is within one in-flight window).
//
// Caveats: changing Connections or Group leaves the old sessions at the
// broker, holding their queued messages (remove them by connecting once
// with those client ids and clean session). With Connections == 1 prefer
// MQTT, which keeps the plain subscription and its session.
type SharedMQTT struct {
	opts   MQTTOptions
	shared SharedOptions
	conns  []*MQTT
	q      *pending

	running atomic.Bool
	mu      sync.Mutex // serializes OnConnectionChange across connections
	up      int        // connections up
	allUp   atomic.Bool
}

// NewSharedMQTT returns a source reading over shared.Connections
// connections; Run connects. Options are checked by Run.
func NewSharedMQTT(opts MQTTOptions, shared SharedOptions, log *slog.Logger) *SharedMQTT {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts.Topics = append([]string(nil), opts.Topics...)
	opts.setDefaults()
	if shared.Group == "" {
		shared.Group = strings.Map(func(r rune) rune {
			if r == '/' || r == '+' || r == '#' {
				return '_'
			}
			return r
		}, opts.ClientID)
	}
	s := &SharedMQTT{opts: opts, shared: shared, q: newPending()}
	for i := 0; i < shared.Connections; i++ {
		o := opts
		o.ClientID = opts.ClientID + "-" + strconv.Itoa(i)
		o.Topics = make([]string, len(opts.Topics))
		for j, t := range opts.Topics {
			o.Topics[j] = "$share/" + shared.Group + "/" + t
		}
		o.OnConnectionChange = s.connectionChanged
		s.conns = append(s.conns, &MQTT{opts: o, log: log.With("broker", o.Broker, "client_id", o.ClientID), q: s.q, session: uint16(i)})
	}
	return s
}

// Check reports what Run would refuse, without connecting.
func (s *SharedMQTT) Check() error { return s.validate() }

func (s *SharedMQTT) validate() error {
	if s.shared.Connections < 1 {
		return fmt.Errorf("source: mqtt connections %d: must be at least 1", s.shared.Connections)
	}
	if s.shared.Group == "" || strings.ContainsAny(s.shared.Group, "/+#") {
		return fmt.Errorf("source: mqtt shared subscription group %q: must be non-empty, without '/', '+' or '#'", s.shared.Group)
	}
	for _, t := range s.opts.Topics {
		if strings.HasPrefix(t, "$") {
			return fmt.Errorf("source: mqtt topic %q: a shared subscription cannot take a '$' topic", t)
		}
	}
	if err := s.opts.validate(); err != nil {
		return err
	}
	return nil
}

// connectionChanged reports to OnConnectionChange when the source as a whole
// changes: connected means every connection is up, so one lost connection
// reports false and its return reports true (one reconnect).
func (s *SharedMQTT) connectionChanged(up bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.up == len(s.conns)
	if up {
		s.up++
	} else {
		s.up--
	}
	now := s.up == len(s.conns)
	if was == now {
		return
	}
	if s.opts.OnConnectionChange != nil {
		s.opts.OnConnectionChange(now)
	}
	s.allUp.Store(now)
}

// Stats implements StatsReporter: counters summed over the connections;
// Connected is true while every connection is up; Reconnects counts
// connections re-made by any of them.
func (s *SharedMQTT) Stats() Stats {
	var st Stats
	for _, c := range s.conns {
		st.Received += c.received.Load()
		st.Dropped += c.dropped.Load()
		st.Reconnects += c.reconnects.Load()
	}
	st.Connected = s.allUp.Load()
	st.Pending = s.q.len()
	return st
}

// Run implements Source, as MQTT.Run: it returns an error only for invalid
// options, keeps every connection up otherwise, and returns nil once ctx is
// cancelled and every connection is closed. Queued messages stay queued for
// a later Run.
func (s *SharedMQTT) Run(ctx context.Context, out chan<- []Message) error {
	if err := s.validate(); err != nil {
		return err
	}
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("source: mqtt source is already running")
	}
	defer s.running.Store(false)
	if s.opts.QoS == 0 {
		s.conns[0].log.Warn("mqtt source subscribes at QoS 0: at most once, messages are lost while disconnected or when more than max_pending wait")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range s.conns {
		wg.Go(func() { c.connectLoop(ctx) })
	}
	s.q.deliver(ctx, out)
	wg.Wait()
	return nil
}
