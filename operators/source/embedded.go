package source

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddy-edge/eddy/operators/broker"
)

const (
	// embeddedMaxPending is how many messages the embedded source holds
	// before the broker's publish hook waits for room.
	embeddedMaxPending = 10000
	// embeddedMaxWait bounds that wait; it stays below common keepalive
	// ping timeouts (paho: 10 s), so a waiting sensor is not dropped for a
	// missed ping before it is told no.
	embeddedMaxWait = 5 * time.Second
)

// Embedded reads the messages sensors publish to Eddy's embedded broker.
//
// It subscribes when built, so nothing published between building and
// running a pipeline is missed, and unsubscribes when Run returns (messages
// then matching no subscriber are acknowledged by the broker as any broker
// does, so stop the sensors' broker before or with its sources when that
// matters).
//
// Backpressure: the broker's hook copies each message into a queue of up to
// 10000 messages and returns, after which the broker acks the sensor. When
// the queue is full, the hook waits for room, up to 5 s or until Run ends:
// that stalls the publishing sensor's connection, and only it, which is
// what an embedded broker should do. If no room appears, the publish is
// rejected: QoS 1/2 sensors are disconnected unacknowledged and re-send on
// reconnect; QoS 0 messages are lost (counted in Stats.Dropped).
//
// Until a durable ingest log sits in the hook, a message acked to the
// sensor lives only in memory until delivered.
type Embedded struct {
	broker  *broker.Broker
	filters []string
	log     *slog.Logger
	q       *pending
	// maxPending and maxWait are embeddedMaxPending and embeddedMaxWait,
	// fields so tests can make them small.
	maxPending int
	maxWait    time.Duration

	mu          sync.Mutex
	unsubscribe func()

	done      atomic.Pointer[<-chan struct{}] // ctx.Done of the running Run
	received  atomic.Uint64
	dropped   atomic.Uint64
	connected atomic.Bool
}

// NewEmbedded returns a source of the messages published to b on topics
// matching filters (validated with broker.ValidateFilter; an invalid one
// panics). It subscribes at once.
func NewEmbedded(b *broker.Broker, filters []string, log *slog.Logger) Source {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Embedded{broker: b, filters: append([]string(nil), filters...), log: log, q: newPending(),
		maxPending: embeddedMaxPending, maxWait: embeddedMaxWait}
	e.subscribe()
	return e
}

func (e *Embedded) subscribe() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.unsubscribe == nil {
		e.unsubscribe = e.broker.Subscribe(e.filters, e.receive)
	}
}

// receive runs in the broker's publish hook.
func (e *Embedded) receive(topic string, payload []byte) error {
	var done <-chan struct{}
	if p := e.done.Load(); p != nil {
		done = *p
	}
	err := e.q.pushCopyWait(topic, payload, time.Now().UnixMilli(), e.maxPending, done, e.maxWait)
	if err != nil {
		e.dropped.Add(1)
		if errors.Is(err, errPendingFull) {
			e.log.Warn("embedded source: queue full, publish rejected", "topic", topic, "pending", e.maxPending)
		}
		return err
	}
	e.received.Add(1)
	return nil
}

// Run implements Source. It returns nil when ctx is cancelled; it has no
// other end.
func (e *Embedded) Run(ctx context.Context, out chan<- []Message) error {
	e.subscribe()
	done := ctx.Done()
	e.done.Store(&done)
	e.connected.Store(true)
	defer func() {
		e.connected.Store(false)
		e.mu.Lock()
		e.unsubscribe()
		e.unsubscribe = nil
		e.mu.Unlock()
		e.done.Store(nil)
	}()
	e.q.deliver(ctx, out)
	return nil
}

// Stats implements StatsReporter.
func (e *Embedded) Stats() Stats {
	return Stats{
		Received:  e.received.Load(),
		Dropped:   e.dropped.Load(),
		Connected: e.connected.Load(),
		Pending:   e.q.len(),
	}
}
