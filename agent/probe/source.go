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
	run := randomHex(4)
	res := &SourceResult{Source: s.Source, Broker: s.Endpoint.Broker}
	o := &res.Observed
	o.Filters, o.QoS = s.Filters, s.QoS
	var topics []string
	for _, f := range s.Filters {
		if t, ok := TopicFor(f); ok {
			topics = append(topics, t)
		}
	}
	res.Topics = topics
	type conn struct {
		c   mqtt.Client
		obs *SourceConn
	}
	var (
		mu      sync.Mutex
		seen    = make(map[int][]int) // test message → connections it reached
		changed = make(chan struct{}, 1)
	)
	handler := func(idx int) mqtt.MessageHandler {
		return func(_ mqtt.Client, m mqtt.Message) {
			var t testMsg
			if json.Unmarshal(m.Payload(), &t) != nil || t.Run != run {
				return
			}
			mu.Lock()
			seen[t.Seq] = append(seen[t.Seq], idx)
			mu.Unlock()
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	var conns []conn
	defer func() {
		for _, c := range conns {
			c.c.Disconnect(100)
		}
	}()
	open := func(idx int, clientID string, filters []string, shared bool) (*SourceConn, error) {
		c, err := connectPaho(s.Endpoint, clientID, handler(idx))
		if err != nil {
			return nil, err
		}
		sc := &SourceConn{ClientID: clientID, Shared: shared}
		conns = append(conns, conn{c, sc})
		if sc.Granted, err = subscribeAll(c, filters, byte(s.QoS)); err != nil {
			return nil, err
		}
		return sc, nil
	}
	n := max(s.Connections, 1)
	if n == 1 {
		sc, err := open(0, s.Endpoint.ClientID+"-probe", s.Filters, false)
		if err != nil {
			return nil, err
		}
		o.Conns = []SourceConn{*sc}
	} else {
		plain, err := open(-1, s.Endpoint.ClientID+"-probe", s.Filters, false)
		if err != nil {
			return nil, err
		}
		o.Plain = plain
		shared := make([]string, len(s.Filters))
		for i, f := range s.Filters {
			shared[i] = "$share/" + s.Group + "-probe/" + f
		}
		for i := range n {
			sc, err := open(i, s.Endpoint.ClientID+"-probe-"+strconv.Itoa(i), shared, true)
			if err != nil {
				return nil, err
			}
			o.Conns = append(o.Conns, *sc)
		}
	}
	// Enough messages that a broker spreading the group round robin gives
	// each connection at least two.
	per := max(2*n, 2)
	if len(topics) > 0 {
		pub := conns[0].c
		seq := 0
		for i := range per {
			seq++
			t := topics[i%len(topics)]
			tok := pub.Publish(t, 1, false, testPayload(run, 0, seq, 0))
			if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil || !pub.IsConnectionOpen() {
				o.PublishRefused = true
				break
			}
			o.Published++
		}
	}
	if o.Published > 0 {
		want := func() bool {
			mu.Lock()
			defer mu.Unlock()
			if len(seen) < o.Published {
				return false
			}
			if o.Plain == nil {
				return true
			}
			for _, idxs := range seen {
				if len(idxs) < 2 { // the plain one and a shared one
					return false
				}
			}
			return true
		}
		quiet := time.NewTimer(sourceSettle)
	wait:
		for !want() {
			select {
			case <-changed:
				quiet.Reset(sourceSettle)
			case <-quiet.C:
				break wait
			case <-ctx.Done():
				break wait
			}
		}
		quiet.Stop()
	}
	mu.Lock()
	for _, idxs := range seen {
		sharedHits := 0
		for _, i := range idxs {
			if i < 0 {
				o.Plain.Received++
			} else {
				o.Conns[i].Received++
				sharedHits++
			}
		}
		if sharedHits > 1 {
			o.SharedDuplicates++
		}
	}
	mu.Unlock()
	res.Verdict = DecideSource(*o)
	return res, nil
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
