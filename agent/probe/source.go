package probe

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// Source is one source "mqtt" to probe.
type Source struct {
	Source string
	// Endpoint is the source's own; the probe's client ids are its client
	// id with "-probe-N" (the shared connections) or "-probe" appended.
	Endpoint Endpoint
	// Filters are the source's topic filters with ${device_id} filled in.
	Filters     []string
	QoS         int
	Connections int
	// Group is the source's shared subscription group; the probe's
	// connections join "<Group>-probe" instead, so a running agent's
	// group keeps all its messages.
	Group string
}

// SourceResult is a source probe's observations with the verdict.
type SourceResult struct {
	Source   string             `json:"source"`
	Broker   string             `json:"broker"`
	Topics   []string           `json:"test_topics"`
	Observed SourceObservations `json:"observed"`
	Verdict  SourceVerdict      `json:"verdict"`
}

// sourceSettle is how long the source probe waits for test messages after
// the last one arrived (or after publishing, when none does).
const sourceSettle = 2 * time.Second

// ProbeSource subscribes as the source would (clean sessions, probe client
// ids, its shared subscription group with a -probe suffix), publishes test
// messages to topics the filters match, and reports what reached which
// connection. With Connections > 1 it also subscribes one plain
// connection, which tells a broker that takes $share/... literally from a
// topic the probe may not publish to.
func ProbeSource(ctx context.Context, s Source) (*SourceResult, error) {
	res := &SourceResult{Source: s.Source, Broker: s.Endpoint.Broker}
	for _, f := range s.Filters {
		if t, ok := TopicFor(f); ok {
			res.Topics = append(res.Topics, t)
		}
	}
	p := &sourceProbe{s: s, run: randomHex(4), o: &res.Observed, seen: map[int][]int{}, changed: make(chan struct{}, 1)}
	p.o.Filters, p.o.QoS = s.Filters, s.QoS
	defer p.close()
	if err := p.connect(); err != nil {
		return nil, err
	}
	p.publish(res.Topics)
	if p.o.Published > 0 {
		p.awaitArrivals(ctx)
	}
	p.tally()
	res.Verdict = DecideSource(*p.o)
	return res, nil
}

// sourceProbe is one run of ProbeSource: its connections, and which of
// them each test message of this run reached.
type sourceProbe struct {
	s     Source
	run   string // tells this run's test messages from others'
	o     *SourceObservations
	conns []mqtt.Client

	mu      sync.Mutex
	seen    map[int][]int // test message → connections it reached (-1: the plain one)
	changed chan struct{} // a test message arrived
}

func (p *sourceProbe) close() {
	for _, c := range p.conns {
		c.Disconnect(100)
	}
}

// connect opens the source's connections as run would: one, or, for
// connections = N, N in the shared-subscription group and a plain one
// beside them that sees every message.
func (p *sourceProbe) connect() error {
	id := p.s.Endpoint.ClientID + "-probe"
	n := max(p.s.Connections, 1)
	if n == 1 {
		sc, err := p.open(0, id, p.s.Filters, false)
		if err != nil {
			return err
		}
		p.o.Conns = []SourceConn{*sc}
		return nil
	}
	plain, err := p.open(-1, id, p.s.Filters, false)
	if err != nil {
		return err
	}
	p.o.Plain = plain
	shared := make([]string, len(p.s.Filters))
	for i, f := range p.s.Filters {
		shared[i] = "$share/" + p.s.Group + "-probe/" + f
	}
	for i := range n {
		sc, err := p.open(i, id+"-"+strconv.Itoa(i), shared, true)
		if err != nil {
			return err
		}
		p.o.Conns = append(p.o.Conns, *sc)
	}
	return nil
}

func (p *sourceProbe) open(idx int, clientID string, filters []string, shared bool) (*SourceConn, error) {
	c, err := connectPaho(p.s.Endpoint, clientID, p.handler(idx))
	if err != nil {
		return nil, err
	}
	p.conns = append(p.conns, c)
	sc := &SourceConn{ClientID: clientID, Shared: shared}
	if sc.Granted, err = subscribeAll(c, filters, byte(p.s.QoS)); err != nil {
		return nil, err
	}
	return sc, nil
}

// handler records this run's test messages that reach connection idx.
func (p *sourceProbe) handler(idx int) mqtt.MessageHandler {
	return func(_ mqtt.Client, m mqtt.Message) {
		var t testMsg
		if json.Unmarshal(m.Payload(), &t) != nil || t.Run != p.run {
			return
		}
		p.mu.Lock()
		p.seen[t.Seq] = append(p.seen[t.Seq], idx)
		p.mu.Unlock()
		select {
		case p.changed <- struct{}{}:
		default:
		}
	}
}

// publish sends enough test messages to the topics that a broker spreading
// the group round robin gives each connection at least two; it stops at
// the first the broker refuses.
func (p *sourceProbe) publish(topics []string) {
	if len(topics) == 0 {
		return
	}
	pub := p.conns[0]
	for i := range 2 * max(p.s.Connections, 1) {
		tok := pub.Publish(topics[i%len(topics)], 1, false, testPayload(p.run, 0, i+1, 0))
		if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil || !pub.IsConnectionOpen() {
			p.o.PublishRefused = true
			return
		}
		p.o.Published++
	}
}

// arrived reports whether every test message reached the connections it
// should: any one, and with a plain connection beside a group, that one
// too.
func (p *sourceProbe) arrived() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.seen) < p.o.Published {
		return false
	}
	if p.o.Plain == nil {
		return true
	}
	for _, idxs := range p.seen {
		if len(idxs) < 2 { // the plain one and a shared one
			return false
		}
	}
	return true
}

// awaitArrivals waits until every test message arrived, or sourceSettle
// passed without one arriving (what did not come by then does not come).
func (p *sourceProbe) awaitArrivals(ctx context.Context) {
	quiet := time.NewTimer(sourceSettle)
	defer quiet.Stop()
	for !p.arrived() {
		select {
		case <-p.changed:
			quiet.Reset(sourceSettle)
		case <-quiet.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// tally counts what each connection received, and the messages that
// reached more than one connection of the group.
func (p *sourceProbe) tally() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, idxs := range p.seen {
		sharedHits := 0
		for _, i := range idxs {
			if i < 0 {
				p.o.Plain.Received++
			} else {
				p.o.Conns[i].Received++
				sharedHits++
			}
		}
		if sharedHits > 1 {
			p.o.SharedDuplicates++
		}
	}
}

// TopicFor returns a topic that filter matches: each '+' level and a
// trailing '#' become "eddy-probe". It reports false for a filter under a
// '$' topic, which a probe does not publish to.
func TopicFor(filter string) (string, bool) {
	if strings.HasPrefix(filter, "$") {
		return "", false
	}
	levels := strings.Split(filter, "/")
	for i, l := range levels {
		if l == "+" || l == "#" {
			levels[i] = "eddy-probe"
		}
	}
	return strings.Join(levels, "/"), true
}

// SharedGroup is the shared subscription group of a source whose client id
// is clientID, as the source names it: '/', '+' and '#' become '_'.
func SharedGroup(clientID string) string { return topicLevel(clientID) }
