package walsink

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
)

// collector is the tests' upstream consumer: a paho subscriber with a fixed
// client id, clean session 0, QoS 2. It deduplicates nothing itself: it
// records every payload's id, ignoring only what the broker marks DUP and
// is byte-identical to a payload already received — mosquitto 2.0.11
// re-sends QoS 2 messages it had delivered when restarted with SIGTERM
// while draining (operators/io/walsink/doc.go "Caveats").
type collector struct {
	mu         sync.Mutex
	ids        []string
	seen       map[string][]byte
	brokerDups int
	// retransmitted holds the ids whose first receipt the broker marked
	// DUP: its own re-sends, after its restart, of deliveries to this
	// subscriber that never arrived. Those come when the broker resends
	// them, after newer messages (mosquitto 2.0.11 under load), so the
	// order they arrive in says nothing about the order the sink
	// published in.
	retransmitted map[string]bool
	client        mqtt.Client
}

func startCollector(t testing.TB, broker, topic string) *collector {
	t.Helper()
	c := &collector{seen: map[string][]byte{}, retransmitted: map[string]bool{}}
	opts := mqtt.NewClientOptions().AddBroker(broker).SetClientID("collector-" + sanitize(t.Name())).
		SetCleanSession(false).SetOrderMatters(true).SetAutoReconnect(true).
		SetConnectRetry(true).SetConnectRetryInterval(50 * time.Millisecond).
		SetMaxReconnectInterval(200 * time.Millisecond)
	opts.SetDefaultPublishHandler(func(_ mqtt.Client, m mqtt.Message) { c.receive(m) })
	opts.SetOnConnectHandler(func(cl mqtt.Client) {
		cl.Subscribe(topic, 2, func(_ mqtt.Client, m mqtt.Message) { c.receive(m) })
	})
	c.client = mqtt.NewClient(opts)
	if tok := c.client.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("collector connect: %v", tok.Error())
	}
	tok := c.client.Subscribe(topic, 2, func(_ mqtt.Client, m mqtt.Message) { c.receive(m) })
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("collector subscribe: %v", tok.Error())
	}
	t.Cleanup(func() { c.client.Disconnect(100) })
	return c
}

func sanitize(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if ch == '/' || ch == '#' || ch == '+' {
			b[i] = '_'
		}
	}
	return string(b)
}

func (c *collector) receive(m mqtt.Message) {
	id := payloadID(m.Payload())
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.seen[id]; ok && m.Duplicate() && bytes.Equal(prev, m.Payload()) {
		c.brokerDups++
		return
	}
	c.seen[id] = append([]byte(nil), m.Payload()...)
	c.ids = append(c.ids, id)
	if m.Duplicate() {
		c.retransmitted[id] = true
	}
}

// payloadID extracts the "id" field of a test payload {"id":"...",...}.
func payloadID(p []byte) string {
	const key = `{"id":"`
	if !bytes.HasPrefix(p, []byte(key)) {
		return "?" + string(p)
	}
	rest := p[len(key):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return "?" + string(p)
	}
	return string(rest[:end])
}

// waitFor waits until n ids arrived (or timeout), returning what arrived;
// on a timeout it reports an error and returns what came, so the caller's
// exactly-once check can say what is missing.
func (c *collector) waitFor(t testing.TB, n int, timeout time.Duration) []string {
	t.Helper()
	if err := await.Within(timeout, c.atLeast(n)); err != nil {
		t.Errorf("collector: %v", err)
	}
	return c.received()
}

// atLeast is the condition that n ids arrived.
func (c *collector) atLeast(n int) func() error {
	return func() error {
		if got := c.count(); got < n {
			return fmt.Errorf("%d of %d messages", got, n)
		}
		return nil
	}
}

// noMoreThan checks over d that no more than n ids arrive: after the
// expected ones came, a late repeat or a wrong publish shows as one more.
func (c *collector) noMoreThan(t testing.TB, n int, d time.Duration) {
	t.Helper()
	await.Never(t, d, func() error {
		if got := c.received(); len(got) > n {
			return fmt.Errorf("collector: %d messages, want %d; the ones beyond: %v", len(got), n, got[n:])
		}
		return nil
	})
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ids)
}

func (c *collector) received() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.ids...)
}

// checkExactlyOnce reports duplicates, missing ids and order violations
// against want (in publishing order).
func checkExactlyOnce(t testing.TB, got, want []string) {
	t.Helper()
	checkExactlyOnceAcrossRestarts(t, got, want, nil, 0)
}

// checkExactlyOnceAcrossRestarts is checkExactlyOnce for a broker that was
// restarted while delivering: the ids in retransmitted (collector's) are
// checked for duplicates and loss but not for order, and an id that arrives
// after newer ones by at most brokerWindow positions (the broker's
// max_inflight_messages towards the subscriber) is counted, not an error:
// mosquitto 2.0.11 restores its in-flight window to the subscriber from its
// database and may send the part it had not sent yet, without DUP, after
// newer messages. A displacement beyond the window is not the broker's and
// fails.
func checkExactlyOnceAcrossRestarts(t testing.TB, got, want []string, retransmitted map[string]bool, brokerWindow int) (brokerReordered int) {
	t.Helper()
	count := map[string]int{}
	for _, id := range got {
		count[id]++
	}
	dups, missing := 0, 0
	for id, n := range count {
		if n > 1 {
			dups += n - 1
			if dups < 5 {
				t.Errorf("id %s received %d times", id, n)
			}
		}
	}
	pos := map[string]int{}
	for i, id := range want {
		pos[id] = i
		if count[id] == 0 {
			missing++
			if missing < 5 {
				t.Errorf("id %s missing", id)
			}
		}
	}
	for id := range count {
		if _, ok := pos[id]; !ok {
			t.Errorf("unexpected id %s", id)
		}
	}
	last := -1
	disorder := 0
	for _, id := range got {
		if retransmitted[id] {
			continue
		}
		p := pos[id]
		if p < last && last-p <= brokerWindow {
			brokerReordered++
		} else if p < last {
			disorder++
			if disorder < 5 {
				t.Errorf("id %s (position %d) after position %d", id, p, last)
			}
		}
		last = max(last, p)
	}
	if dups+missing+disorder > 0 {
		t.Errorf("duplicates %d, missing %d, out of order %d (of %d expected, %d received)", dups, missing, disorder, len(want), len(got))
	}
	return brokerReordered
}

// testPayload is a deterministic output record for message i of epoch e.
func testPayload(dst []byte, epoch uint64, i int) []byte {
	dst = append(dst, `{"id":"`...)
	dst = testID(dst, epoch, i)
	dst = append(dst, `","pipeline":"p","kind":"final","n":`...)
	dst = strconv.AppendInt(dst, int64(i), 10)
	return append(dst, '}')
}

func testID(dst []byte, epoch uint64, i int) []byte {
	return fmt.Appendf(dst, "e%d-%d", epoch, i)
}
