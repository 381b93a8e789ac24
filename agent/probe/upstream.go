package probe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/eddy-edge/eddy/operators/io/walsink/qos2"
)

// Upstream is one sink "mqtt" to probe.
type Upstream struct {
	Sink string
	// Endpoint is the sink's own; the probe appends "-probe" (publisher)
	// and "-probe-sub" (subscriber) to its client id.
	Endpoint Endpoint
	Config   UpstreamConfig
	// DeviceID names the scratch topic eddy-probe/DEVICE/RANDOM.
	DeviceID string
	// Topic is the sink's topic rendered with probe values; "" skips the
	// topic check.
	Topic string
	// WindowCap bounds the windows tried (default: the larger of
	// max_inflight and 1000); SizeCap the payloads (default: max_payload,
	// else 1 MiB).
	WindowCap, SizeCap int
}

// UpstreamResult is a probe's observations with the verdict.
type UpstreamResult struct {
	Sink         string `json:"sink"`
	Broker       string `json:"broker"`
	ScratchTopic string `json:"scratch_topic"`
	// FirstDelivery is the time from publishing one QoS 1 message to its
	// delivery to the probe's subscriber.
	FirstDelivery time.Duration        `json:"first_delivery_ns"`
	Observed      UpstreamObservations `json:"observed"`
	Verdict       UpstreamVerdict      `json:"verdict"`
}

// ackTimeout bounds the wait for a trial's acknowledgements: a broker that
// answers not at all within it is taken as one that stalls the window.
const ackTimeout = 10 * time.Second

// ProbeUpstream measures u's broker (see the package doc) and decides.
// It returns an error when it cannot measure at all: the broker refuses the
// connection, or the probe's scratch topic delivers nothing.
func ProbeUpstream(ctx context.Context, u Upstream) (*UpstreamResult, error) {
	// Before the first delivery is timed, stragglers get a generous wait.
	p := &upstreamProbe{u: u, run: randomHex(4), settle: 3 * time.Second}
	p.pubEP = u.Endpoint
	p.pubEP.ClientID += "-probe"
	if p.u.WindowCap <= 0 {
		p.u.WindowCap = min(max(u.Config.MaxInflight, 1000), 65535)
	}
	if p.u.SizeCap <= 0 {
		p.u.SizeCap = 1 << 20
		if u.Config.MaxPayload > 0 {
			p.u.SizeCap = int(min(u.Config.MaxPayload, 256<<20))
		}
	}
	res := &UpstreamResult{Sink: u.Sink, Broker: u.Endpoint.Broker,
		ScratchTopic: "eddy-probe/" + topicLevel(u.DeviceID) + "/" + p.run}
	p.scratch = res.ScratchTopic
	sub, err := newSubscriber(u.Endpoint, p.run)
	if err != nil {
		return nil, err
	}
	defer sub.close()
	p.sub = sub
	if g, err := sub.subscribe(p.scratch, 2); err != nil {
		return nil, err
	} else if g == 0x80 {
		return nil, fmt.Errorf("the broker refuses the probe's subscription to its scratch topic %s: allow it (publish and subscribe) for client ids ending in -probe and -probe-sub", p.scratch)
	}
	defer p.closeConn()
	o := &res.Observed
	// One message first: the time to its delivery sets how long a trial
	// waits for stragglers, and it shows the scratch topic works.
	if _, err := p.connect(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	first, err := p.trial(ctx, 1, 1)
	if err != nil {
		return nil, err
	}
	res.FirstDelivery = time.Since(start)
	if !first.Passed() {
		return nil, fmt.Errorf("a test message published at QoS 1 to the probe's scratch topic %s never arrived: allow that topic (publish and subscribe) for client ids ending in -probe and -probe-sub", p.scratch)
	}
	// By the time a burst is acknowledged the broker has routed every
	// message it kept; what is left is the trip to the subscriber, so a
	// quiet second (more on a slow link) ends the wait.
	p.settle = max(time.Second, 10*res.FirstDelivery)
	o.QoS1 = append(o.QoS1, first)
	if o.QoS1, err = p.ladder(ctx, 1, o.QoS1); err != nil {
		return nil, err
	}
	var first2 Trial
	if o.Mode, first2, err = p.qos2Mode(ctx); err != nil {
		return nil, err
	}
	if o.Mode == QoS2OK {
		if o.QoS2, err = p.ladder(ctx, 2, []Trial{first2}); err != nil {
			return nil, err
		}
	}
	if o.Sizes, err = p.sizes(ctx); err != nil {
		return nil, err
	}
	o.SizeCap = p.u.SizeCap
	if u.Topic != "" {
		if o.Topic, err = p.topicCheck(ctx); err != nil {
			return nil, err
		}
	}
	res.Verdict = DecideUpstream(u.Config, *o)
	return res, nil
}

type upstreamProbe struct {
	u       Upstream
	pubEP   Endpoint
	run     string
	scratch string
	sub     *subscriber
	conn    *rawConn
	trialN  int
	settle  time.Duration
}

func (p *upstreamProbe) connect(ctx context.Context) (*rawConn, error) {
	if p.conn == nil {
		c, err := dialRaw(ctx, p.pubEP)
		if err != nil {
			return nil, err
		}
		p.conn = c
	}
	return p.conn, nil
}

func (p *upstreamProbe) closeConn() {
	if p.conn != nil {
		p.conn.close()
		p.conn = nil
	}
}

// ladder runs trials at qos until NextWindow has the window.
func (p *upstreamProbe) ladder(ctx context.Context, qos byte, trials []Trial) ([]Trial, error) {
	for {
		w, ok := NextWindow(trials, p.u.WindowCap)
		if !ok {
			return trials, nil
		}
		t, err := p.trial(ctx, qos, w)
		if err != nil {
			return trials, err
		}
		trials = append(trials, t)
	}
}

// trial publishes w numbered messages to the scratch topic at qos in one
// write and counts what comes back: acknowledgements on the connection,
// arrivals at the subscriber. QoS 2 flows run through the exactly-once
// sink's own session (qos2.Session), so the probe's packets are the sink's.
func (p *upstreamProbe) trial(ctx context.Context, qos byte, w int) (Trial, error) {
	t := Trial{QoS: qos, Window: w}
	c, err := p.connect(ctx)
	if err != nil {
		return t, err
	}
	p.trialN++
	payload := func(seq int) []byte { return testPayload(p.run, p.trialN, seq, 0) }
	var sess *qos2.Session
	now := time.Now()
	if qos == 2 {
		sess = qos2.New(qos2.Config{MaxInflight: w})
		sess.Connected(now)
		for seq := 1; seq <= w; seq++ {
			sess.Publish(uint64(seq), []byte(p.scratch), payload(seq), false)
		}
	} else {
		for seq := 1; seq <= w; seq++ {
			if err := c.publish(1, uint16(seq), false, p.scratch, payload(seq)); err != nil {
				break
			}
		}
	}
	send := func() {
		if sess == nil || !sess.HasReady() {
			_ = c.flush()
			return
		}
		rd := sess.Ready()
		for _, pk := range rd.Packets {
			switch pk.Kind {
			case qos2.PacketPublish:
				_ = c.publish(2, pk.ID, pk.Dup, string(pk.Topic), pk.Payload)
			case qos2.PacketPubrel:
				_ = c.pubrel(pk.ID)
			}
		}
		t.Completed += len(rd.Completed)
		sess.Advance()
		_ = c.flush()
	}
	send()
	timer := time.NewTimer(ackTimeout)
	defer timer.Stop()
	done := func() bool {
		if qos == 2 {
			return t.Completed+t.Pubacks >= w
		}
		return t.Acked >= w
	}
	for !done() && !t.Closed {
		select {
		case a, ok := <-c.acks:
			if !ok || a.err != nil {
				t.Closed = true
				continue
			}
			switch a.kind {
			case packets.Puback:
				if qos == 2 {
					t.Pubacks++
				} else {
					t.Acked++
				}
			case packets.Pubrec:
				t.Acked++
				_ = sess.Step(qos2.Pubrec, a.id)
			case packets.Pubcomp:
				_ = sess.Step(qos2.Pubcomp, a.id)
			}
			if sess != nil && len(c.acks) == 0 {
				send()
			}
		case <-timer.C:
			t.Closed = true // a stalled window: the next trial starts afresh
		case <-ctx.Done():
			return t, ctx.Err()
		}
	}
	if t.Closed {
		p.closeConn()
	} else if sess != nil && sess.HasReady() {
		send()
	}
	t.Arrived, t.Duplicates = p.sub.wait(ctx, p.trialN, w, p.settle)
	return t, p.sub.check()
}

// qos2Mode publishes one QoS 2 message and classifies the answer. A close
// without an answer counts as a refusal only when it happens on two
// connections in a row (the first could be a broker restarting), as the
// sink itself decides.
func (p *upstreamProbe) qos2Mode(ctx context.Context) (QoS2Mode, Trial, error) {
	for range 2 {
		t, err := p.trial(ctx, 2, 1)
		if err != nil {
			return QoS2Unknown, t, err
		}
		switch {
		case t.Pubacks > 0:
			p.closeConn() // the flow is the broker's QoS 1 now; start clean
			return QoS2Downgraded, t, nil
		case t.Acked > 0:
			return QoS2OK, t, nil
		}
	}
	return QoS2Refused, Trial{}, nil
}

// sizes publishes one QoS 1 message of each payload size, 1 KiB and up by
// factors of 4 to the cap, until one is refused or lost.
func (p *upstreamProbe) sizes(ctx context.Context) ([]SizeTrial, error) {
	var out []SizeTrial
	for n := 1 << 10; ; n *= 4 {
		n = min(n, p.u.SizeCap)
		s, err := p.publishOne(ctx, p.scratch, n)
		if err != nil {
			return out, err
		}
		out = append(out, s)
		if !(s.Acked && s.Arrived) || n >= p.u.SizeCap {
			return out, nil
		}
	}
}

// publishOne publishes one QoS 1 test message of n payload bytes to topic,
// which the subscriber must be subscribed to.
func (p *upstreamProbe) publishOne(ctx context.Context, topic string, n int) (SizeTrial, error) {
	s := SizeTrial{Bytes: n}
	c, err := p.connect(ctx)
	if err != nil {
		return s, err
	}
	p.trialN++
	_ = c.publish(1, 1, false, topic, testPayload(p.run, p.trialN, 1, n))
	_ = c.flush()
	timer := time.NewTimer(ackTimeout)
	defer timer.Stop()
	for !s.Acked && !s.Closed {
		select {
		case a, ok := <-c.acks:
			if !ok || a.err != nil {
				s.Closed = true
				p.closeConn()
			} else if a.kind == packets.Puback {
				s.Acked = true
			}
		case <-timer.C:
			s.Closed = true
			p.closeConn()
		case <-ctx.Done():
			return s, ctx.Err()
		}
	}
	arrived, _ := p.sub.wait(ctx, p.trialN, 1, p.settle)
	s.Arrived = arrived == 1
	return s, p.sub.check()
}

// topicCheck publishes one QoS 1 message to the sink's real topic, rendered
// with probe values, while the subscriber listens there: a close refuses
// it, a PUBACK without delivery is a broker that drops it.
func (p *upstreamProbe) topicCheck(ctx context.Context) (*TopicCheck, error) {
	tc := &TopicCheck{Topic: p.u.Topic}
	g, err := p.sub.subscribe(p.u.Topic, 1)
	if err != nil {
		return nil, err
	}
	tc.SubscribeRefused = g == 0x80
	s, err := p.publishOne(ctx, p.u.Topic, 0)
	if err != nil {
		return nil, err
	}
	tc.Acked, tc.Arrived, tc.Closed = s.Acked, s.Arrived, s.Closed
	return tc, nil
}

// testPayload is a test message: JSON naming the probe run, the trial and
// the message's number, padded to size bytes when size is larger.
func testPayload(run string, trial, seq, size int) []byte {
	b := fmt.Appendf(nil, `{"eddy_probe":%q,"trial":%d,"seq":%d`, run, trial, seq)
	if pad := size - len(b) - len(`,"pad":""}`); pad > 0 {
		b = append(b, `,"pad":"`...)
		b = append(b, strings.Repeat("x", pad)...)
		b = append(b, '"')
	}
	return append(b, '}')
}

type testMsg struct {
	Run   string `json:"eddy_probe"`
	Trial int    `json:"trial"`
	Seq   int    `json:"seq"`
}

// subscriber is the probe's paho client: it counts the test messages of
// this run that arrive, per trial and number.
type subscriber struct {
	c   mqtt.Client
	run string

	mu      sync.Mutex
	changed chan struct{}
	counts  map[[2]int]int // (trial, seq) → arrivals
}

func newSubscriber(ep Endpoint, run string) (*subscriber, error) {
	s := &subscriber{run: run, changed: make(chan struct{}, 1), counts: make(map[[2]int]int)}
	c, err := connectPaho(ep, ep.ClientID+"-probe-sub", s.onMessage)
	if err != nil {
		return nil, err
	}
	s.c = c
	return s, nil
}

// connectPaho connects a paho client with a clean session and no
// reconnects, every message to handler.
func connectPaho(ep Endpoint, clientID string, handler mqtt.MessageHandler) (mqtt.Client, error) {
	o := mqtt.NewClientOptions().AddBroker(ep.Broker).SetClientID(clientID).SetCleanSession(true).
		SetAutoReconnect(false).SetConnectRetry(false).SetOrderMatters(false).
		SetConnectTimeout(10 * time.Second).SetDefaultPublishHandler(handler).SetKeepAlive(60 * time.Second)
	if ep.Username != "" {
		o.SetUsername(ep.Username)
	}
	if ep.Password != "" {
		o.SetPassword(ep.Password)
	}
	if ep.TLS != nil {
		o.SetTLSConfig(ep.TLS)
	}
	c := mqtt.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(15*time.Second) || tok.Error() != nil {
		err := tok.Error()
		if err == nil {
			err = errors.New("timed out")
		}
		return nil, fmt.Errorf("connect %s as %s: %w", ep.Broker, clientID, err)
	}
	return c, nil
}

// subscribeAll subscribes c to filters at qos and returns the granted QoS
// of each (0x80: refused).
func subscribeAll(c mqtt.Client, filters []string, qos byte) ([]int, error) {
	m := make(map[string]byte, len(filters))
	for _, f := range filters {
		m[f] = qos
	}
	tok := c.SubscribeMultiple(m, nil)
	if !tok.WaitTimeout(15*time.Second) || tok.Error() != nil {
		err := tok.Error()
		if err == nil {
			err = errors.New("no SUBACK")
		}
		return nil, fmt.Errorf("subscribe %v: %w", filters, err)
	}
	res := tok.(*mqtt.SubscribeToken).Result()
	g := make([]int, len(filters))
	for i, f := range filters {
		g[i] = int(res[f])
	}
	return g, nil
}

func (s *subscriber) subscribe(topic string, qos byte) (int, error) {
	g, err := subscribeAll(s.c, []string{topic}, qos)
	if err != nil {
		return 0, err
	}
	return g[0], nil
}

func (s *subscriber) onMessage(_ mqtt.Client, m mqtt.Message) {
	var t testMsg
	if json.Unmarshal(m.Payload(), &t) != nil || t.Run != s.run {
		return
	}
	s.mu.Lock()
	s.counts[[2]int{t.Trial, t.Seq}]++
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// wait waits until n distinct messages of trial arrived, or settle passed
// without a new one, and returns the distinct count and the repeats.
func (s *subscriber) wait(ctx context.Context, trial, n int, settle time.Duration) (arrived, dups int) {
	count := func() (int, int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		a, d := 0, 0
		for seq := 1; seq <= n; seq++ {
			if c := s.counts[[2]int{trial, seq}]; c > 0 {
				a++
				d += c - 1
			}
		}
		return a, d
	}
	quiet := time.NewTimer(settle)
	defer quiet.Stop()
	for {
		a, d := count()
		if a >= n {
			return a, d
		}
		select {
		case <-s.changed:
			quiet.Reset(settle) // Go 1.23 timers: no stale tick to drain
		case <-quiet.C:
			return count()
		case <-ctx.Done():
			return count()
		}
	}
}

// check returns an error once the subscriber's connection is gone: what
// it counts after that says nothing about the publisher's messages.
func (s *subscriber) check() error {
	if !s.c.IsConnectionOpen() {
		return errors.New("the broker closed the probe's subscriber connection")
	}
	return nil
}

func (s *subscriber) close() { s.c.Disconnect(100) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// topicLevel makes s one topic level: '/', '+', '#' become '_'.
func topicLevel(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '+' || r == '#' {
			return '_'
		}
		return r
	}, s)
}
