package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/aedes"
)

// aedesUpstream is aedes as the exactly-once sink's upstream broker. aedes
// keeps sessions in memory only: a restart loses the sink's QoS 2 state
// and the collector's subscription. It publishes a QoS 2 message on receipt
// (before its PUBREC) and remembers the packet id, so within one process a
// re-send is delivered once; a flow whose PUBREC had not reached the sink
// when aedes restarted is published again by the sink (MQTT requires it),
// and the new process, which never saw it, delivers it a second time.
// Those repeats are the broker's, and only those: brokerRepeats proves each
// from aedes' own log of what it published (LogPublishes) and from the
// packet trace of the sink's connections (the sink reaches aedes through an
// mqttProxy).
//
// The collector's own session dies with each restart too. So that it
// counts exactly what aedes published, a stop first cuts the sink off
// (the proxy closes its connection and refuses new ones), waits until the
// collector has every result aedes logged as published, then stops aedes;
// a start lets the sink in again once the collector has subscribed anew.
// To the sink this is its broker gone and back without its session.
type aedesUpstream struct {
	t     *testing.T
	b     *aedes.Broker
	proxy *mqttProxy
}

func startAedesUpstream(t *testing.T) upstream {
	b := aedes.Start(t, aedes.LogPublishes("results/"))
	trace := ""
	if os.Getenv("EDDY_AEDES_TRACE") != "" {
		trace = filepath.Join(b.Dir(), "trace.txt")
	}
	a := &aedesUpstream{t: t, b: b, proxy: startMQTTProxy(t, b.Addr(), trace)}
	keepOnFailure(t, a.proxy, b.Dir())
	return a
}

func (a *aedesUpstream) collectorURL() string { return a.b.URL() }
func (a *aedesUpstream) sinkURL() string      { return a.proxy.URL() }

// published is how many results aedes logged as published, in all its
// processes.
func (a *aedesUpstream) published() int { return strings.Count(a.b.Log(), "Z published ") }

func (a *aedesUpstream) stop(c *collector) {
	a.proxy.pause()
	if !waitUntil(60*time.Second, func() bool { return c.received() >= a.published() }) {
		a.t.Errorf("the collector got %d results, aedes published %d", c.received(), a.published())
	}
	a.b.Stop()
}

func (a *aedesUpstream) restart(c *collector) {
	a.stop(c)
	a.b.Restart()
	subscribed := func() bool {
		log := a.b.Log()
		return strings.Contains(log[strings.LastIndex(log, "aedes listening on"):], "subscribe collector results/#@2")
	}
	if !waitUntil(60*time.Second, subscribed) {
		a.t.Errorf("the collector did not subscribe again within 60 s")
	}
	a.proxy.resume()
}

// brokerRepeats reads aedes' log: per result of device, which aedes
// processes published it. It fails the test if one process published a
// result twice (aedes delivers a re-send of a flow it holds once: the sink
// sent it as a new message), if the collector's copies differ from what
// aedes published, or if the trace shows the sink publishing a result
// again after it had released it (sent PUBREL: it had the broker's PUBREC).
// Every other repeat is a restarted aedes taking a re-sent flow it no
// longer knew: one per process beyond the first.
func (a *aedesUpstream) brokerRepeats(t *testing.T, c *collector, device string) map[string]int {
	t.Helper()
	procs := map[string][]int{} // result id → the aedes processes that published it
	proc := 0
	for _, line := range strings.Split(a.b.Log(), "\n") {
		if strings.Contains(line, "aedes listening on") {
			proc++
			continue
		}
		if !strings.Contains(line, "Z published ") {
			continue
		}
		m := traceResult.FindStringSubmatch(line)
		if m == nil || !strings.HasPrefix(m[1], device+"/") {
			continue
		}
		procs[m[1]] = append(procs[m[1]], proc)
	}
	repeats := map[string]int{}
	twice := 0
	for id, ps := range procs {
		for i := 1; i < len(ps); i++ {
			if ps[i] == ps[i-1] {
				if twice++; twice <= 5 {
					t.Errorf("%s published twice by one aedes process (%v)", id, ps)
				}
			}
		}
		repeats[id] = len(ps) - 1
	}
	c.mu.Lock()
	differ := 0
	for id, n := range c.receipts {
		if strings.HasPrefix(id, device+"/") && n != len(procs[id]) {
			differ++
		}
	}
	for id := range procs {
		if c.receipts[id] != len(procs[id]) && differ < 5 {
			t.Errorf("%s: the collector got %d copies, aedes published %d", id, c.receipts[id], len(procs[id]))
		}
	}
	c.mu.Unlock()
	if differ > 0 {
		t.Errorf("%d results of %s: the collector's copies differ from aedes' log", differ, device)
	}
	// The sink's side: once it sent PUBREL for a flow it had the
	// broker's PUBREC, and may only ever send PUBREL for it again.
	lastPub := map[uint16]string{} // packet id → the result last published with it
	released := map[string]bool{}
	again := 0
	for _, e := range a.proxy.Events() {
		switch {
		case e.kind == pktPublish && !e.toAgent:
			if released[e.result] {
				if again++; again <= 5 {
					t.Errorf("%s published again (connection %d, packet id %d) after the sink released it", e.result, e.conn, e.id)
				}
			}
			lastPub[e.id] = e.result
		case e.kind == pktPubrel && !e.toAgent:
			released[lastPub[e.id]] = true
		}
	}
	n := 0
	for _, r := range repeats {
		n += r
	}
	t.Logf("aedes' log: %d results of %s published, %d of them again by a restarted aedes; %d processes", len(procs), device, n, proc)
	return repeats
}
