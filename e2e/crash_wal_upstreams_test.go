package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/aedes"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// memoryUpstream is an upstream broker of the exactly-once sink that keeps
// sessions in memory only (aedes; the embedded broker of a second agent):
// a restart loses the sink's QoS 2 state and the collector's subscription.
// Both publish a QoS 2 message on receipt (before its PUBREC) and remember
// its packet id, so within one process a re-sent flow is delivered once;
// but a flow whose PUBREC had not reached the sink when the broker stopped
// is published again by the sink (MQTT requires it), and the new process,
// which never saw it, delivers it a second time. Those repeats are the
// broker's, and only those: brokerRepeats proves each from the packet trace
// of the sink's connections (the sink reaches the broker through an
// mqttProxy) and, where the broker logs what it publishes (aedes), from
// that log.
//
// The collector's session dies with each restart too. So that it gets
// every result the broker published, a stop first cuts the sink off (the
// proxy closes its connection and refuses new ones), waits until the
// collector has every result the broker provably published, then stops
// the broker; a start lets the sink in again once the collector has
// subscribed to the new process. To the sink this is its broker gone and
// back without its session. The collector connects once per process, so
// aedes' reuse of packet ids across the connections of one session
// (docs/upstream.md) does not reach it.
type memoryUpstream struct {
	t     *testing.T
	url   string // the broker's own, for the collector
	proxy *mqttProxy
	// halt and start stop the broker process and start a new one.
	halt, start func()
	// logged, if set, is the broker's own record: per result id, the
	// processes (numbered from 1) that published it.
	logged func() map[string][]int
	// publishedCount, with logged, is how many messages the broker's log
	// has it publish (all processes, all devices); settled reports
	// whether the broker is done with the sink's connections (has routed
	// all they brought).
	publishedCount func() int
	settled        func() bool

	mu        sync.Mutex
	running   bool
	colMarks  []int // the collector's receipts when each process stopped
	connMarks []int // the proxy's connections when each later process started
}

func (m *memoryUpstream) collectorURL() string { return m.url }
func (m *memoryUpstream) sinkURL() string      { return m.proxy.URL() }

func (m *memoryUpstream) stop(c *collector) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.running {
		return
	}
	m.proxy.pause()
	if !await.Holds(60*time.Second, func() bool { return m.caughtUp(c) }) {
		m.t.Errorf("the collector did not get every result the broker published within 60 s")
	}
	m.halt()
	m.running = false
	m.colMarks = append(m.colMarks, c.received())
}

func (m *memoryUpstream) restart(c *collector) {
	m.stop(c)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.connMarks = append(m.connMarks, m.proxy.connections())
	m.start()
	m.running = true
	// The collector's connection to the new process has its
	// subscription (it connects again only when a broker stopped).
	subscribed := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.subscribed > len(m.colMarks)
	}
	if !await.Holds(60*time.Second, subscribed) {
		m.t.Errorf("the collector did not subscribe again within 60 s")
	}
	m.proxy.resume()
}

// caughtUp reports whether the collector has every result the broker
// provably published: all those in its log, or without one, those of the
// current process whose PUBREC the proxy relayed to the sink.
func (m *memoryUpstream) caughtUp(c *collector) bool {
	if m.publishedCount != nil {
		// The collector gets nothing but what the broker published.
		return m.settled() && c.received() >= m.publishedCount()
	}
	proc := len(m.colMarks) + 1
	want := map[string]int{}
	for _, f := range m.flows() {
		if f.proc == proc && f.acked {
			want[f.result] = 1
		}
	}
	got := m.collected(c)
	for id, n := range want {
		if countOf(got[id], proc) < n {
			return false
		}
	}
	return true
}

func countOf(ps []int, p int) int {
	n := 0
	for _, q := range ps {
		if q == p {
			n++
		}
	}
	return n
}

// collected is, per result id, the broker processes the collector's
// copies came from.
func (m *memoryUpstream) collected(c *collector) map[string][]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]int{}
	proc := 1
	for i, id := range c.order {
		for proc <= len(m.colMarks) && i >= m.colMarks[proc-1] {
			proc++
		}
		out[id] = append(out[id], proc)
	}
	return out
}

// sinkFlow is one PUBLISH of a result by the sink, as the proxy relayed it.
type sinkFlow struct {
	result string
	proc   int  // the broker process it went to
	acked  bool // the broker's PUBREC for it was relayed to the sink
	// afterRelease: the sink had sent PUBREL for this result before.
	afterRelease bool
}

// flows reads the proxy's trace: every PUBLISH of the sink, in order.
func (m *memoryUpstream) flows() []sinkFlow {
	var out []sinkFlow
	open := map[[2]int]int{}       // (connection, packet id) → its PUBLISH in out
	lastPub := map[uint16]string{} // packet id → the result last published with it
	released := map[string]bool{}
	for _, e := range m.proxy.Events() {
		switch {
		case e.kind == pktPublish && !e.toAgent:
			proc := 1
			for proc <= len(m.connMarks) && e.conn > m.connMarks[proc-1] {
				proc++
			}
			open[[2]int{e.conn, int(e.id)}] = len(out)
			out = append(out, sinkFlow{result: e.result, proc: proc, afterRelease: released[e.result]})
			lastPub[e.id] = e.result
		case e.kind == pktPubrec && e.toAgent && !e.lost:
			if i, ok := open[[2]int{e.conn, int(e.id)}]; ok {
				out[i].acked = true
			}
		case e.kind == pktPubrel && !e.toAgent:
			released[lastPub[e.id]] = true
		}
	}
	return out
}

// brokerRepeats: per result of device, the broker processes its copies at
// the collector came from. It fails the test if one process delivered a
// result twice (it delivers a re-sent flow it holds once: the sink sent it
// as a new message), if a copy came from a process the sink never sent it
// to, if the trace shows the sink publishing a result again after it had
// released it (sent PUBREL: it had the broker's PUBREC), or, with the
// broker's own log, if the collector's copies differ from what the broker
// published. Every other repeat is a restarted broker taking a re-sent
// flow it no longer knew: one per process beyond the first.
func (m *memoryUpstream) brokerRepeats(t reporter, c *collector, device string) map[string]int {
	t.Helper()
	errs := 0
	fail := func(format string, a ...any) {
		if errs++; errs <= 10 {
			t.Errorf(format, a...)
		}
	}
	sentTo := map[string][]int{}
	for _, f := range m.flows() {
		if !strings.HasPrefix(f.result, device+"/") {
			continue
		}
		if f.afterRelease {
			fail("%s published again (to broker process %d) after the sink had released it", f.result, f.proc)
		}
		sentTo[f.result] = append(sentTo[f.result], f.proc)
	}
	var logged map[string][]int
	if m.logged != nil {
		logged = m.logged()
	}
	repeats := map[string]int{}
	n := 0
	got := m.collected(c)
	for id, ps := range got {
		if !strings.HasPrefix(id, device+"/") {
			continue
		}
		for i, p := range ps {
			if i > 0 && p == ps[i-1] {
				fail("%s delivered twice by broker process %d", id, p)
			}
			if !slices.Contains(sentTo[id], p) {
				fail("%s delivered by broker process %d, which the sink never sent it to (sent to %v)", id, p, sentTo[id])
			}
		}
		if logged != nil && !slices.Equal(ps, logged[id]) {
			fail("%s: the collector's copies came from broker processes %v, the broker's log has it published by %v", id, ps, logged[id])
		}
		repeats[id] = len(ps) - 1
		n += len(ps) - 1
	}
	for id := range logged {
		if strings.HasPrefix(id, device+"/") && len(got[id]) == 0 {
			fail("%s published by the broker, never at the collector", id)
		}
	}
	if errs > 10 {
		t.Errorf("%d such errors", errs)
	}
	t.Logf("%d results of %s delivered again by a restarted broker (%d broker processes)", n, device, len(m.colMarks)+1)
	return repeats
}

// startAedesUpstream is aedes, logging every result it publishes.
func startAedesUpstream(t *testing.T) upstream {
	b := aedes.Start(t, aedes.LogPublishes("results/#"))
	trace := ""
	if os.Getenv("EDDY_AEDES_TRACE") != "" {
		trace = filepath.Join(b.Dir(), "trace.txt")
	}
	m := &memoryUpstream{t: t, url: b.URL(), proxy: startMQTTProxy(t, b.Addr(), trace), halt: b.Stop, start: b.Restart, running: true}
	keepOnFailure(t, m.proxy, b.Dir())
	m.publishedCount = func() int { return strings.Count(b.Log(), "Z published ") }
	// aedes routes what a connection brought (in-memory persistence:
	// promise callbacks only) before it handles the connection's close.
	m.settled = func() bool {
		log := b.Log()
		log = log[strings.LastIndex(log, "aedes listening on"):]
		col := strings.Count(log, " client connected collector") - strings.Count(log, " client disconnected collector")
		return strings.Count(log, " client connected ")-strings.Count(log, " client disconnected ") == col
	}
	m.logged = func() map[string][]int {
		out := map[string][]int{}
		proc := 0
		for _, line := range strings.Split(b.Log(), "\n") {
			if strings.Contains(line, "aedes listening on") {
				proc++
			} else if strings.Contains(line, "Z published ") {
				if r := traceResult.FindStringSubmatch(line); r != nil {
					out[r[1]] = append(out[r[1]], proc)
				}
			}
		}
		return out
	}
	return m
}

// startEmbeddedUpstream is the embedded broker of a second agent, stopped
// with SIGINT and started again. It keeps no log of what it publishes: the
// collector's copies are judged against the packet trace alone. Its
// max_inflight is raised to the most: the broker drops a QoS 1/2 message
// for a subscriber that has max_inflight of them unacknowledged already
// (mochi's "client store quota reached"), and the collector, one client
// taking the results of a whole window at once, falls that far behind on
// a busy machine.
func startEmbeddedUpstream(t *testing.T) upstream {
	addr := loopback.Addr(t)
	r := newCrashRun(t, strings.Replace(embeddedCrashConfig(addr), `broker { listen = "`+addr+`" }`, "broker {\n  listen       = \""+addr+"\"\n  max_inflight = 65535\n}", 1))
	r.ready = func() bool { return healthzStatus(r.admin) == http.StatusOK }
	r.start()
	m := &memoryUpstream{t: t, url: "tcp://" + addr, proxy: startMQTTProxy(t, addr, ""), halt: r.stop, start: r.start, running: true}
	return m
}

// judgeRecord records what a judge reports.
type judgeRecord struct{ errs []string }

func (*judgeRecord) Helper()                     {}
func (*judgeRecord) Logf(string, ...any)         {}
func (j *judgeRecord) Errorf(f string, a ...any) { j.errs = append(j.errs, fmt.Sprintf(f, a...)) }

// TestMemoryUpstream_JudgesRepeats: brokerRepeats allows a repeat only
// from a restarted broker process the sink sent the unreleased flow to,
// and fails the other cases, on a made-up trace: results a and b published
// on connection 1 (process 1), a's PUBREC relayed and released; the broker
// restarted; b published again on connection 2 (process 2).
func TestMemoryUpstream_JudgesRepeats(t *testing.T) {
	trace := []proxyEvent{
		{conn: 1, kind: pktPublish, id: 1, result: "d/a"},
		{conn: 1, kind: pktPublish, id: 2, result: "d/b"},
		{conn: 1, kind: pktPubrec, toAgent: true, id: 1},
		{conn: 1, kind: pktPubrel, id: 1},
		{conn: 2, kind: pktPublish, id: 2, result: "d/b"},
	}
	for _, tc := range []struct {
		name    string
		order   []string // the collector's receipts; process 1's are the first two
		extra   []proxyEvent
		wantErr string
		repeats int
	}{
		{name: "restart_repeat", order: []string{"d/a", "d/b", "d/b"}, repeats: 1},
		{name: "once", order: []string{"d/a", "d/b"}},
		{name: "twice_in_one_process", order: []string{"d/a", "d/a", "d/b"}, wantErr: "twice by broker process 1"},
		{name: "from_a_process_not_sent_to", order: []string{"d/a", "d/b", "d/a"}, wantErr: "which the sink never sent it to"},
		{name: "published_after_release", order: []string{"d/a", "d/b", "d/b"},
			extra: []proxyEvent{{conn: 2, kind: pktPublish, id: 1, result: "d/a"}}, wantErr: "after the sink had released it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &memoryUpstream{proxy: &mqttProxy{events: append(slices.Clone(trace), tc.extra...)}, colMarks: []int{2}, connMarks: []int{1}}
			c := &collector{receipts: map[string]int{}, order: tc.order}
			var j judgeRecord
			rep := m.brokerRepeats(&j, c, "d")
			if tc.wantErr == "" && len(j.errs) > 0 || tc.wantErr != "" && !slices.ContainsFunc(j.errs, func(e string) bool { return strings.Contains(e, tc.wantErr) }) {
				t.Fatalf("errors %q, want one containing %q", j.errs, tc.wantErr)
			}
			if n := rep["d/b"] + rep["d/a"]; tc.wantErr == "" && n != tc.repeats {
				t.Fatalf("%d repeats allowed, want %d", n, tc.repeats)
			}
		})
	}
}
