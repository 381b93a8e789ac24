package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// Simulator defaults.
const (
	DefaultSimulatorTopic   = "sensors/${sensor}/telemetry"
	DefaultSimulatorDevices = 10
	DefaultSimulatorRate    = 10.0
	// simulatorWindow is how many publishes may await their PUBACK.
	simulatorWindow = 256
)

// SimulatorOptions configures the sensor simulator.
type SimulatorOptions struct {
	// Broker is the MQTT URL to publish to (tcp://, ssl://, ws://, wss://).
	Broker string
	// ClientID is the simulator's MQTT client id. Default "eddy-simulator".
	ClientID string
	// Username and Password, when set, are the MQTT credentials.
	Username, Password string
	// Topic is the topic per reading; ${sensor} becomes the device name.
	// Default DefaultSimulatorTopic.
	Topic string
	// Devices is the number of sensors, named sensor-1..sensor-N. Default
	// DefaultSimulatorDevices.
	Devices int
	// Rate is readings per second over all devices. Default
	// DefaultSimulatorRate.
	Rate float64
	// Seed makes the readings' content reproducible (timestamps aside).
	Seed int64
	// OutOfOrder, Late and Malformed are fractions of readings (0..1, sum
	// at most 1): stamped up to 1.5 s in the past, stamped 30 to 90 s in
	// the past, and malformed (broken JSON, no ts, or temp as a string).
	OutOfOrder, Late, Malformed float64
	// MaxReadings stops Run after that many readings; 0 is unlimited.
	MaxReadings int64
	// QoS is the publish QoS. The zero value is QoS 0: set 1 for the
	// at-least-once delivery the quickstart shows.
	QoS byte
	// ProtocolVersion is 4 (MQTT 3.1.1 through paho; also 0) or 5 (MQTT 5,
	// simv5.go: each reading carries the content type application/json and
	// the user property "sensor"; a broker that refuses version 5 gets
	// 3.1.1). MQTT 5 needs a tcp:// or ssl:// broker.
	ProtocolVersion byte
}

// Simulator publishes realistic sensor readings over MQTT: per-device
// temperature and humidity random walks around different means, as
// {"device":"sensor-3","ts":<ms>,"temp":21.53,"humidity":40.1}, with the
// configured fractions out of order, late and malformed. It exists for the
// quickstart and for tests.
type Simulator struct {
	opts      SimulatorOptions
	log       *slog.Logger
	now       func() time.Time // replaced in tests
	published atomic.Int64
}

// NewSimulator returns a simulator; Run publishes.
func NewSimulator(opts SimulatorOptions, log *slog.Logger) *Simulator {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.ClientID == "" {
		opts.ClientID = "eddy-simulator"
	}
	if opts.Topic == "" {
		opts.Topic = DefaultSimulatorTopic
	}
	if opts.Devices == 0 {
		opts.Devices = DefaultSimulatorDevices
	}
	if opts.Rate == 0 {
		opts.Rate = DefaultSimulatorRate
	}
	return &Simulator{opts: opts, log: log, now: time.Now}
}

// Published returns the number of readings published (and, at QoS 1/2,
// acknowledged or awaiting acknowledgement) so far.
func (s *Simulator) Published() int64 { return s.published.Load() }

// Check reports what Run would refuse, without connecting.
func (s *Simulator) Check() error { return s.opts.validate() }

func (o *SimulatorOptions) validate() error {
	switch {
	case o.Broker == "":
		return errors.New("source: simulator needs a broker URL")
	case o.Devices < 0:
		return fmt.Errorf("source: simulator devices %d: must be positive", o.Devices)
	case o.Rate < 0:
		return fmt.Errorf("source: simulator rate %g: must be positive", o.Rate)
	case o.QoS > 2:
		return fmt.Errorf("source: simulator qos %d: must be 0, 1 or 2", o.QoS)
	case o.ProtocolVersion != 0 && o.ProtocolVersion != 4 && o.ProtocolVersion != 5:
		return fmt.Errorf("source: simulator protocol version %d: must be 4 or 5", o.ProtocolVersion)
	case o.ProtocolVersion == 5 && !v5Scheme(o.Broker):
		return fmt.Errorf("source: simulator broker URL %q: MQTT 5 is spoken on tcp://, mqtt:// and ssl:// brokers; set protocol version 4", o.Broker)
	case o.OutOfOrder < 0 || o.Late < 0 || o.Malformed < 0 || o.OutOfOrder+o.Late+o.Malformed > 1:
		return fmt.Errorf("source: simulator fractions out of order %g, late %g, malformed %g: each 0..1, sum at most 1", o.OutOfOrder, o.Late, o.Malformed)
	}
	return nil
}

// Run connects (retrying until the broker is up) and publishes at Rate until
// MaxReadings are published or ctx is cancelled; either way it returns nil
// after the published readings are acknowledged (QoS 1/2). It returns an
// error for invalid options or a failed publish.
func (s *Simulator) Run(ctx context.Context) error {
	if err := s.opts.validate(); err != nil {
		return err
	}
	if s.opts.ProtocolVersion == 5 {
		err := s.runV5(ctx)
		if !errors.Is(err, errV5Refused) {
			return err
		}
		s.log.Warn("simulator: the broker does not speak MQTT 5; publishing at MQTT 3.1.1")
	}
	o := paho.NewClientOptions().AddBroker(s.opts.Broker).SetClientID(s.opts.ClientID).
		SetUsername(s.opts.Username).SetPassword(s.opts.Password).
		SetConnectRetry(true).SetConnectRetryInterval(time.Second).SetAutoReconnect(true).
		SetMaxReconnectInterval(10 * time.Second)
	client := paho.NewClient(o)
	if err := waitToken(ctx, client.Connect()); err != nil {
		client.Disconnect(0)
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("source: simulator connect: %w", err)
	}
	defer client.Disconnect(250)
	s.log.Info("simulator publishing", "broker", s.opts.Broker, "devices", s.opts.Devices, "rate", s.opts.Rate)

	gen := newReadingGenerator(s.opts)
	var inflight []paho.Token // publishes awaiting their ack, oldest first
	pc := s.newPacer()
	defer pc.stop()
	for !pc.finished() {
		// Publish every reading due by now, then sleep until the next one.
		for pc.due() {
			topic, payload, _ := gen.reading(s.now().UnixMilli())
			tok := client.Publish(topic, s.opts.QoS, false, payload)
			inflight = append(inflight, tok)
			if len(inflight) >= simulatorWindow {
				if err := waitToken(ctx, inflight[0]); err != nil {
					return s.publishErr(ctx, err)
				}
				inflight = inflight[1:]
			}
			pc.published()
		}
		if pc.finished() {
			break
		}
		select {
		case <-pc.next():
		case <-ctx.Done():
			return s.drain(ctx, inflight)
		}
	}
	return s.drain(ctx, inflight)
}

// pacer spaces the simulator's readings Rate a second from its start, up to
// MaxReadings.
type pacer struct {
	s        *Simulator
	start    time.Time
	interval time.Duration
	timer    *time.Timer
	n        int64
}

func (s *Simulator) newPacer() *pacer {
	return &pacer{s: s, start: s.now(), interval: max(time.Duration(float64(time.Second)/s.opts.Rate), 1), timer: time.NewTimer(0)}
}

// finished reports whether MaxReadings are published.
func (p *pacer) finished() bool { return p.s.opts.MaxReadings != 0 && p.n >= p.s.opts.MaxReadings }

// due reports whether another reading is due by now.
func (p *pacer) due() bool {
	return !p.finished() && p.n < int64(p.s.now().Sub(p.start)/p.interval)+1
}

// published counts a reading published.
func (p *pacer) published() {
	p.n++
	p.s.published.Store(p.n)
}

// next fires when the next reading is due.
func (p *pacer) next() <-chan time.Time {
	p.timer.Reset(p.start.Add(time.Duration(p.n) * p.interval).Sub(p.s.now()))
	return p.timer.C
}

func (p *pacer) stop() { p.timer.Stop() }

// drain waits for the outstanding publishes; on a cancelled ctx it gives
// them a short grace period.
func (s *Simulator) drain(ctx context.Context, inflight []paho.Token) error {
	if ctx.Err() != nil {
		grace, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ctx = grace
	}
	for _, tok := range inflight {
		if err := waitToken(ctx, tok); err != nil {
			return s.publishErr(ctx, err)
		}
	}
	return nil
}

func (s *Simulator) publishErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("source: simulator publish: %w", err)
}
