package sink

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eddy-edge/eddy/operators/record"
)

// MQTTOptions configure the at-least-once MQTT sink.
type MQTTOptions struct {
	// Broker is the broker URL: tcp://host:1883, ssl://host:8883, ws://…, wss://….
	Broker string
	// ClientID must be unique per connection to the broker, or two clients
	// keep disconnecting each other. Empty means "eddy-" + DeviceID; a device
	// with several MQTT sinks on one broker must set distinct ids.
	ClientID string
	// Topic is a template over TopicVariables, e.g. "sites/${device_id}/${pipeline}/${key}".
	Topic string
	// QoS is 0 (at most once) or 1 (at least once). QoS 2 is refused: through
	// paho it is not exactly once either; that is the WAL sink's job.
	QoS byte
	// Retain sets the MQTT retain flag on every message.
	Retain bool
	// Username and Password are sent on connect when Username is not empty.
	Username, Password string
	// TLS configures ssl:// and wss:// connections; nil uses Go's defaults.
	TLS *tls.Config
	// DeviceID fills ${device_id} in the topic and the default client id.
	DeviceID string
	// PublishTimeout bounds one Write: waiting for the connection plus
	// waiting for every publish of the batch to complete. Zero means 30s.
	PublishTimeout time.Duration
	// MaxReconnectInterval caps the exponential backoff between reconnect
	// attempts (paho's; it starts at 1s). Zero means 1 minute.
	MaxReconnectInterval time.Duration
}

const (
	defaultPublishTimeout       = 30 * time.Second
	defaultMaxReconnectInterval = time.Minute
	connectRetryInterval        = 2 * time.Second
	disconnectQuiesceMillis     = 250
)

// MQTT is the at-least-once MQTT sink returned by NewMQTT. Use it through
// Sink; type-assert to *MQTT for Stats.
type MQTT struct {
	opts   MQTTOptions
	topic  *Template
	client paho.Client
	store  *copyingStore
	log    *slog.Logger

	mu       sync.Mutex // serializes Write and Close; guards the buffers
	topicBuf []byte
	tokens   []paho.Token
	keys     []string // store keys of the batch's QoS 1 publishes
	closed   bool

	connMu sync.Mutex
	up     chan struct{} // closed while the connection is up

	published, failed atomic.Uint64
}

// NewMQTT validates opts and starts connecting in the background; it does
// not wait for the broker, so an agent can start while the uplink is down.
// paho reconnects automatically with exponential backoff.
//
// Each Write waits for the connection, publishes every item to the topic
// rendered from opts.Topic, and returns nil only once the broker has
// acknowledged every one (PUBACK at QoS 1; at QoS 0, once written to the
// connection), all within opts.PublishTimeout. A message re-sent after a
// reconnect counts only when its PUBACK arrives, not when paho re-queues it. At QoS 1 the session is
// persistent (clean session off) and paho keeps unacknowledged messages in
// memory and re-sends them after a reconnect, so a Write that failed with
// ErrPublishTimeout may still be delivered; a caller that retries the batch
// may then deliver twice. Consumers drop repeats by the output id. Each
// publish copies its payload (paho holds it until acknowledged), so this
// sink allocates per item, unlike the encoders.
//
// log receives connection events; nil discards them.
func NewMQTT(opts MQTTOptions, log *slog.Logger) (Sink, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Broker == "" {
		return nil, errors.New("sink: mqtt broker is empty")
	}
	if u, err := url.Parse(opts.Broker); err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("sink: mqtt broker %q: want scheme://host:port, e.g. tcp://127.0.0.1:1883", opts.Broker)
	}
	if opts.QoS > 1 {
		return nil, fmt.Errorf("sink: mqtt qos %d: the at-least-once sink supports qos 0 and 1; use delivery = \"exactly_once\" for qos 2", opts.QoS)
	}
	topic, err := ParseTemplate(opts.Topic, TopicVariables)
	if err != nil {
		return nil, fmt.Errorf("sink: mqtt topic: %w", err)
	}
	if opts.ClientID == "" {
		opts.ClientID = "eddy-" + opts.DeviceID
	}
	if opts.PublishTimeout <= 0 {
		opts.PublishTimeout = defaultPublishTimeout
	}
	if opts.MaxReconnectInterval <= 0 {
		opts.MaxReconnectInterval = defaultMaxReconnectInterval
	}
	s := &MQTT{opts: opts, topic: topic, log: log, up: make(chan struct{}), store: newCopyingStore()}

	co := paho.NewClientOptions().
		AddBroker(opts.Broker).
		SetClientID(opts.ClientID).
		SetCleanSession(opts.QoS == 0).
		SetStore(s.store).
		SetAutoReconnect(true).
		SetConnectRetry(true).
		SetConnectRetryInterval(connectRetryInterval).
		SetMaxReconnectInterval(opts.MaxReconnectInterval).
		SetWriteTimeout(opts.PublishTimeout).
		SetOnConnectHandler(func(paho.Client) { s.setUp(true, nil) }).
		SetConnectionLostHandler(func(_ paho.Client, err error) { s.setUp(false, err) }).
		SetReconnectingHandler(func(paho.Client, *paho.ClientOptions) {
			s.log.Debug("sink: mqtt reconnecting", "broker", opts.Broker)
		})
	if opts.Username != "" {
		co.SetUsername(opts.Username).SetPassword(opts.Password)
	}
	if opts.TLS != nil {
		co.SetTLSConfig(opts.TLS)
	}
	s.client = paho.NewClient(co)
	// With ConnectRetry the token completes only once connected (or on
	// Disconnect); connection state is followed through the handlers.
	s.client.Connect()
	return s, nil
}

// setUp records a connection change.
func (s *MQTT) setUp(up bool, err error) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	select {
	case <-s.up: // currently up
		if !up {
			s.up = make(chan struct{})
			s.log.Warn("sink: mqtt connection lost", "broker", s.opts.Broker, "client_id", s.opts.ClientID, "err", err)
		}
	default:
		if up {
			close(s.up)
			s.log.Info("sink: mqtt connected", "broker", s.opts.Broker, "client_id", s.opts.ClientID)
		}
	}
}

func (s *MQTT) upChan() <-chan struct{} {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	return s.up
}

// Write publishes items in order and waits for them; see NewMQTT. It returns
// an error wrapping ErrNotConnected if the broker was unreachable for the
// whole PublishTimeout (nothing was published), ErrPublishTimeout if some
// publish was not acknowledged in time, or paho's error for a failed one.
func (s *MQTT) Write(items []record.Item) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("sink: mqtt write: %w", ErrClosed)
	}
	if len(items) == 0 {
		return nil
	}
	deadline := time.NewTimer(s.opts.PublishTimeout)
	defer deadline.Stop()
	select {
	case <-s.upChan():
	case <-deadline.C:
		s.failed.Add(uint64(len(items)))
		return fmt.Errorf("sink: mqtt write to %s: %w", s.opts.Broker, ErrNotConnected)
	}

	var topic string
	for i := range items {
		s.topicBuf = s.topic.Append(s.topicBuf[:0], s.opts.DeviceID, items[i].Result)
		if string(s.topicBuf) != topic { // consecutive items often share a topic
			topic = string(s.topicBuf)
		}
		s.tokens = append(s.tokens, s.client.Publish(topic, s.opts.QoS, s.opts.Retain, bytes.Clone(items[i].Payload)))
	}
	defer func() {
		clear(s.tokens)
		s.tokens = s.tokens[:0]
		s.keys = s.keys[:0]
	}()

	var firstErr error
	timedOut := func() error {
		return fmt.Errorf("sink: mqtt publish to %s after %v: %w", s.opts.Broker, s.opts.PublishTimeout, ErrPublishTimeout)
	}
	expired := deadline.C
	completed := uint64(0)
	for _, tok := range s.tokens {
		select {
		case <-tok.Done():
		case <-expired:
			expired = alreadyExpired // later tokens and waitGone only look
		}
		select {
		case <-tok.Done():
			if err := tok.Error(); err != nil {
				s.failed.Add(1)
				if firstErr == nil {
					firstErr = fmt.Errorf("sink: mqtt publish to %s: %w", s.opts.Broker, err)
				}
				continue
			}
			if id := tok.(*paho.PublishToken).MessageID(); id != 0 {
				s.keys = append(s.keys, "o."+strconv.Itoa(int(id)))
			}
			completed++
		default:
			s.failed.Add(1)
			if firstErr == nil {
				firstErr = timedOut()
			}
		}
	}
	// A token completed by a re-queue after a reconnect is not an ack: wait
	// until paho has dropped every message of the batch from its store.
	if len(s.keys) > 0 && !s.store.waitGone(s.keys, expired) {
		s.failed.Add(completed)
		if firstErr == nil {
			firstErr = timedOut()
		}
		return firstErr
	}
	s.published.Add(completed)
	return firstErr
}

// alreadyExpired is a closed channel: a deadline that has passed.
var alreadyExpired = func() chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// Flush returns nil: Write already waits until the broker has every item.
func (s *MQTT) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("sink: mqtt flush: %w", ErrClosed)
	}
	return nil
}

// Close disconnects, giving the DISCONNECT packet up to 250ms to go out.
// Write has already waited for every publish, so nothing else is pending.
func (s *MQTT) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("sink: mqtt close: %w", ErrClosed)
	}
	s.closed = true
	s.client.Disconnect(disconnectQuiesceMillis)
	return nil
}

// Stats reports how many items were acknowledged (QoS 1) or sent (QoS 0),
// how many failed or timed out, and whether the connection is up now.
// It is safe to call concurrently with Write.
func (s *MQTT) Stats() (published, failed uint64, connected bool) {
	return s.published.Load(), s.failed.Load(), s.client.IsConnectionOpen()
}
