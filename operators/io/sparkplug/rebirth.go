package sparkplug

import (
	"crypto/tls"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// RebirthOptions configure a Rebirther.
type RebirthOptions struct {
	// Broker is the broker URL the edge nodes publish to.
	Broker             string
	ClientID           string
	Username, Password string
	TLS                *tls.Config
	// Every is the least time between two requests to one node: every
	// message of a node after a seq gap is refused until its births
	// come, and one NCMD asks for them. 0 means 5 s.
	Every time.Duration
	Log   *slog.Logger
}

// Rebirther asks edge nodes for their births, as a host application
// does when it cannot read a node's data: an NCMD with Node
// Control/Rebirth = true, at QoS 0 as the specification has commands.
// It has a connection of its own, opened at the first request, so that
// the source's session (its acknowledgements, its reads) is not touched.
// Request never blocks. Safe for concurrent use.
type Rebirther struct {
	opts  RebirthOptions
	log   *slog.Logger
	queue chan nodeKey
	done  chan struct{}
	once  sync.Once // starts run
	stop  sync.Once

	mu   sync.Mutex
	last map[nodeKey]time.Time

	sent, dropped atomic.Uint64
}

// rebirthQueue bounds the requests waiting for the connection; more are
// dropped (counted), and asked again by the node's next refused message.
const rebirthQueue = 64

// NewRebirther returns a Rebirther that connects at its first request.
func NewRebirther(o RebirthOptions) *Rebirther {
	if o.Every <= 0 {
		o.Every = 5 * time.Second
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	return &Rebirther{opts: o, log: log, queue: make(chan nodeKey, rebirthQueue), done: make(chan struct{}), last: map[nodeKey]time.Time{}}
}

// Request asks node group/node for its births, unless it was asked less
// than Every ago. It reports whether a request was queued.
func (r *Rebirther) Request(group, node string) bool {
	k := nodeKey{group, node}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.last[k]; ok && now.Sub(t) < r.opts.Every {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
	}
	r.once.Do(func() { go r.run() })
	select {
	case r.queue <- k:
		r.last[k] = now
		return true
	default:
		r.dropped.Add(1)
		return false
	}
}

// Sent is the number of NCMDs published; Dropped the requests dropped
// because too many waited for the connection.
func (r *Rebirther) Sent() uint64    { return r.sent.Load() }
func (r *Rebirther) Dropped() uint64 { return r.dropped.Load() }

// Close ends the connection; later requests are ignored.
func (r *Rebirther) Close() {
	r.stop.Do(func() {
		r.mu.Lock()
		close(r.done)
		r.mu.Unlock()
	})
}

func (r *Rebirther) run() {
	o := paho.NewClientOptions().AddBroker(r.opts.Broker).SetClientID(r.opts.ClientID).
		SetUsername(r.opts.Username).SetPassword(r.opts.Password).SetCleanSession(true).
		SetAutoReconnect(true).SetConnectRetry(true).SetConnectRetryInterval(time.Second).
		SetMaxReconnectInterval(10 * time.Second)
	if r.opts.TLS != nil {
		o.SetTLSConfig(r.opts.TLS)
	}
	c := paho.NewClient(o)
	defer c.Disconnect(250)
	tok := c.Connect()
	select {
	case <-tok.Done():
	case <-r.done:
		return
	}
	var buf []byte
	for {
		select {
		case <-r.done:
			return
		case k := <-r.queue:
			buf = AppendRebirthCommand(buf[:0], uint64(time.Now().UnixMilli()))
			t := Topic{Group: k.group, Type: NCMD, Node: k.node}.String()
			pt := c.Publish(t, 0, false, append([]byte(nil), buf...))
			select {
			case <-pt.Done():
			case <-r.done:
				return
			}
			if err := pt.Error(); err != nil {
				r.log.Warn("sparkplug: rebirth request not published", "topic", t, "err", err)
				continue
			}
			r.sent.Add(1)
			r.log.Info("sparkplug: asked an edge node for its births (NCMD rebirth)", "group", k.group, "node", k.node)
		}
	}
}

// AppendRebirthCommand appends the payload of an NCMD that asks a node
// for its births: Node Control/Rebirth = true, stamped nowMs, no seq.
func AppendRebirthCommand(dst []byte, nowMs uint64) []byte {
	p := Payload{Timestamp: nowMs, HasTimestamp: true, Metrics: []Metric{
		{Name: []byte(RebirthMetric), Datatype: TypeBoolean, Value: Bool(true)},
	}}
	return AppendPayload(dst, &p)
}
