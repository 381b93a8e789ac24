package main

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// publisher publishes benchmark readings at QoS 1:
// {"device":"dev-K","ts":<ms>,"v":<float>,"seq":N} to "<prefix>/dev-K", with K
// cycling over devices. ts is the wall clock at publish time unless a
// publish call gives one.
type publisher struct {
	client  paho.Client
	prefix  string // topics are prefix + "/dev-K"
	devices int
	seq     int
	buf     []byte
	toks    []paho.Token // unacknowledged publishes, oldest first
}

// maxOutstanding bounds the publishes awaiting PUBACK, so the publisher
// never runs further ahead of the broker than this.
const maxOutstanding = 2000

func newPublisher(url, clientID, prefix string, devices int) (*publisher, error) {
	o := paho.NewClientOptions().AddBroker(url).SetClientID(clientID).SetCleanSession(true).
		SetMaxResumePubInFlight(maxOutstanding).SetWriteTimeout(30 * time.Second)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("publisher connect: %v", tok.Error())
	}
	return &publisher{client: c, prefix: prefix, devices: devices}, nil
}

// publish sends one reading stamped ts (ms).
func (p *publisher) publish(ts int64) error {
	dev := p.seq % p.devices
	p.buf = p.buf[:0]
	p.buf = append(p.buf, `{"device":"dev-`...)
	p.buf = strconv.AppendInt(p.buf, int64(dev), 10)
	p.buf = append(p.buf, `","ts":`...)
	p.buf = strconv.AppendInt(p.buf, ts, 10)
	p.buf = append(p.buf, `,"v":`...)
	p.buf = strconv.AppendFloat(p.buf, float64(p.seq%1000)/10, 'f', 1, 64)
	p.buf = append(p.buf, `,"seq":`...)
	p.buf = strconv.AppendInt(p.buf, int64(p.seq), 10)
	p.buf = append(p.buf, '}')
	p.seq++
	// paho keeps the payload until sent: give it its own copy.
	tok := p.client.Publish(p.prefix+"/dev-"+strconv.Itoa(dev), 1, false, append([]byte(nil), p.buf...))
	p.toks = append(p.toks, tok)
	if len(p.toks) >= maxOutstanding {
		if err := waitTok(p.toks[0]); err != nil {
			return err
		}
		p.toks = p.toks[1:]
	}
	return nil
}

// flush waits for every outstanding PUBACK.
func (p *publisher) flush() error {
	for _, t := range p.toks {
		if err := waitTok(t); err != nil {
			return err
		}
	}
	p.toks = p.toks[:0]
	return nil
}

func (p *publisher) close() { p.client.Disconnect(250) }

func waitTok(t paho.Token) error {
	if !t.WaitTimeout(60 * time.Second) {
		return fmt.Errorf("publish: no PUBACK within 60 s")
	}
	return t.Error()
}

// publishBurst publishes n readings as fast as the broker takes them.
func (p *publisher) publishBurst(n int) error {
	for i := 0; i < n; i++ {
		if err := p.publish(time.Now().UnixMilli()); err != nil {
			return err
		}
	}
	return p.flush()
}

// publishPaced publishes at rate readings/s for d, in 10 ms steps (the
// readings due by each step go out together), stamping each with the time
// it is sent. It returns the number published.
func (p *publisher) publishPaced(rate int, d time.Duration, stop *atomic.Bool) (int, error) {
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	n := 0
	for now := start; now.Sub(start) < d && (stop == nil || !stop.Load()); now = <-tick.C {
		due := int(float64(rate) * now.Sub(start).Seconds())
		for ; n < due; n++ {
			if err := p.publish(time.Now().UnixMilli()); err != nil {
				return n, err
			}
		}
	}
	return n, p.flush()
}

// rawSubscriber is a plain paho subscriber (persistent session, QoS 1,
// paho's automatic acks) that only counts messages: the ceiling any MQTT
// client on this machine and broker reaches.
type rawSubscriber struct {
	client paho.Client
	n      atomic.Int64
	// The handler stamps the arrival of message lo and of message hi
	// (unix ns): a broker holding a persistent session sends its queue
	// before the SUBACK, so most of a backlog may arrive before
	// newRawSubscriber returns, and sampling n afterwards would miss it.
	lo, hi   int64
	tLo, tHi atomic.Int64
}

// newRawSubscriber connects and subscribes; total > 0 is the number of
// messages expected, whose arrivals between 10% and 90% rate measures.
func newRawSubscriber(url, clientID, topic string, total int64) (*rawSubscriber, error) {
	s := &rawSubscriber{lo: total / 10, hi: total * 9 / 10}
	o := paho.NewClientOptions().AddBroker(url).SetClientID(clientID).SetCleanSession(false).
		SetDefaultPublishHandler(func(paho.Client, paho.Message) {
			switch s.n.Add(1) {
			case s.lo:
				s.tLo.Store(time.Now().UnixNano())
			case s.hi:
				s.tHi.Store(time.Now().UnixNano())
			}
		})
	s.client = paho.NewClient(o)
	if tok := s.client.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("subscriber connect: %v", tok.Error())
	}
	if tok := s.client.Subscribe(topic, 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("subscribe: %v", tok.Error())
	}
	return s, nil
}

// rate waits up to timeout for message hi and returns the messages per
// second between messages lo and hi.
func (s *rawSubscriber) rate(timeout time.Duration) (float64, error) {
	deadline := time.Now().Add(timeout)
	for s.tHi.Load() == 0 {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("received %d of %d in %v", s.n.Load(), s.hi, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return float64(s.hi-s.lo) / time.Duration(s.tHi.Load()-s.tLo.Load()).Seconds(), nil
}

func (s *rawSubscriber) close() { s.client.Disconnect(250) }
