package broker

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/mochi-mqtt/server/v2/packets"
)

func TestFilterCovers(t *testing.T) {
	tests := []struct {
		allowed, requested string
		want               bool
	}{
		{"sensors/dev2/#", "sensors/dev2/#", true},
		{"sensors/dev2/#", "sensors/dev2/telemetry", true},
		{"sensors/dev2/#", "sensors/dev2", true},
		{"sensors/dev2/#", "sensors/dev2/+/x", true},
		{"sensors/dev2/#", "#", false},
		{"sensors/dev2/#", "sensors/#", false},
		{"sensors/dev2/#", "sensors/+/telemetry", false},
		{"sensors/dev2/#", "sensors/dev1/telemetry", false},
		{"sensors/+/telemetry", "sensors/dev1/telemetry", true},
		{"sensors/+/telemetry", "sensors/+/telemetry", true},
		{"sensors/+/telemetry", "sensors/#", false},
		{"sensors/+", "sensors/a/b", false},
		{"#", "#", true},
		{"#", "a/+/b", true},
		{"#", "$SYS/#", false},
		{"#", "$SYS/broker/uptime", false},
		{"+/#", "$SYS/broker/uptime", false},
		{"$SYS/#", "$SYS/broker/uptime", true},
		{"$SYS/#", "$SYS/#", true},
		{"a", "+", false},
		{"a/b", "a/b/c", false},
	}
	for _, tt := range tests {
		if got := filterCovers(tt.allowed, tt.requested); got != tt.want {
			t.Errorf("filterCovers(%q, %q) = %v, want %v", tt.allowed, tt.requested, got, tt.want)
		}
	}
}

// TestFilterCovers_AgreesWithMatching checks filterCovers against its
// meaning over every small filter pair: allowed covers requested exactly
// when every topic requested matches is matched by allowed as well.
func TestFilterCovers_AgreesWithMatching(t *testing.T) {
	filters := levelsUpTo([]string{"a", "+", "#", "$S"}, 3)
	topics := levelsUpTo([]string{"a", "c", "$S"}, 4)
	var valid []string
	for _, f := range filters {
		if ValidateFilter(f) == nil {
			valid = append(valid, f)
		}
	}
	for _, a := range valid {
		for _, r := range valid {
			want := true
			for _, topic := range topics {
				if matchFilter(r, topic) && !matchFilter(a, topic) {
					want = false
					break
				}
			}
			if got := filterCovers(a, r); got != want {
				t.Errorf("filterCovers(%q, %q) = %v, want %v", a, r, got, want)
			}
		}
	}
}

// levelsUpTo returns every topic or filter of 1 to n levels drawn from
// levels.
func levelsUpTo(levels []string, n int) []string {
	out := append([]string(nil), levels...)
	last := out
	for range n - 1 {
		var next []string
		for _, p := range last {
			for _, l := range levels {
				next = append(next, p+"/"+l)
			}
		}
		out = append(out, next...)
		last = next
	}
	return out
}

func TestUnshared(t *testing.T) {
	for in, want := range map[string]string{
		"$share/g/sensors/#": "sensors/#",
		"$share/g/$SYS/#":    "$SYS/#",
		"$share/g":           "$share/g",
		"sensors/#":          "sensors/#",
	} {
		if got := unshared(in); got != want {
			t.Errorf("unshared(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLineLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLineLimiter()
	l.now = func() time.Time { return now }
	for i := range logBurst {
		if ok, _ := l.allow("acl"); !ok {
			t.Fatalf("line %d of the burst held back", i)
		}
	}
	for range 5 {
		if ok, _ := l.allow("acl"); ok {
			t.Fatal("a line beyond the burst let through")
		}
	}
	if ok, _ := l.allow("tls"); !ok {
		t.Error("another kind shares the budget")
	}
	now = now.Add(logEvery)
	ok, suppressed := l.allow("acl")
	if !ok || suppressed != 5 {
		t.Errorf("after an interval: ok %v, suppressed %d; want true, 5", ok, suppressed)
	}
	if ok, _ := l.allow("acl"); ok {
		t.Error("two lines in one interval")
	}
}

// TestMochiHandler_NoPackets: mochi's records are passed on with every
// packet replaced by its type, topic and size, never its payload; the acl
// refusals the hook logs itself are dropped; and a flood of one message is
// cut to the limiter's burst.
func TestMochiHandler_NoPackets(t *testing.T) {
	var buf bytes.Buffer
	h := mochiHandler{min: slog.LevelWarn, next: slog.NewTextHandler(&buf, nil), limit: newLineLimiter()}
	log := slog.New(h)
	payload := strings.Repeat("secret-reading ", 20000)
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1},
		TopicName: "sensors/" + strings.Repeat("t", 1000), Payload: []byte(payload)}
	log.Warn("error processing packet", "error", packets.ErrProtocolViolation, "client", "c1", "pk", pk)
	out := buf.String()
	if strings.Contains(out, "secret") || strings.Contains(out, "115 101 99") || len(out) > 1000 {
		t.Fatalf("record holds the payload or is unbounded (%d bytes): %.300s", len(out), out)
	}
	if !strings.Contains(out, "pk.bytes=300000") || !strings.Contains(out, "pk.type=Publish") || !strings.Contains(out, "(cut)") {
		t.Errorf("record lacks the packet's summary: %s", out)
	}

	buf.Reset()
	log.Warn("error processing packet", "error", packets.ErrNotAuthorized, "client", "c1", "pk", pk)
	log.Warn("", "error", fmt.Errorf("read: %w", packets.ErrNotAuthorized))
	log.Info("client connected")
	if buf.Len() != 0 {
		t.Errorf("logged %q, want the hook's refusals and info dropped", buf.String())
	}

	for range 100 {
		log.Warn("error processing packet", "error", packets.ErrProtocolViolation, "pk", pk)
	}
	if n := strings.Count(buf.String(), "\n"); n > logBurst {
		t.Errorf("a flood of 100 records logged %d lines, want at most %d", n, logBurst)
	}
	if h.Enabled(context.Background(), slog.LevelInfo) {
		t.Error("info enabled")
	}
}

// startLogged is mustStart with the broker's log collected.
func startLogged(t *testing.T, opts Options) (*Broker, *lockedBuffer) {
	t.Helper()
	var logs lockedBuffer
	opts.Listen = "127.0.0.1:0"
	b, err := Start(opts, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, &logs
}

// collector subscribes c to filter and collects the topics it receives;
// it returns the SUBACK's return code.
type collector struct {
	mu     sync.Mutex
	topics []string
}

func (col *collector) handle(_ paho.Client, m paho.Message) {
	col.mu.Lock()
	col.topics = append(col.topics, m.Topic())
	col.mu.Unlock()
}

func (col *collector) got() []string {
	col.mu.Lock()
	defer col.mu.Unlock()
	return append([]string(nil), col.topics...)
}

func subscribe(t *testing.T, c paho.Client, filter string, col *collector) byte {
	t.Helper()
	tok := c.Subscribe(filter, 1, col.handle)
	if !tok.WaitTimeout(10 * time.Second) {
		t.Fatalf("subscribe %s: timed out", filter)
	}
	res := tok.(*paho.SubscribeToken).Result()
	if code, ok := res[filter]; ok {
		return code
	}
	return res[unshared(filter)] // paho keys a shared subscription by its filter
}

// TestBroker_SubscribeACL: with acls, a client subscribes only within its
// acl's subscribe filters: dev2, allowed its own subtree, is refused "#",
// "$SYS/#" and dev1's subtree (SUBACK failure, counted, one log line
// each), gets its own messages and none of dev1's; a client whose acl
// names "sensors/#" gets both.
func TestBroker_SubscribeACL(t *testing.T) {
	b, logs := startLogged(t, Options{ACLs: []ACL{
		{User: "*", Publish: []string{"sensors/${username}/#"}, Subscribe: []string{"sensors/${username}/#"}},
		{User: "ops", Subscribe: []string{"sensors/#", "$SYS/#"}},
	}})
	dev1 := connect(t, b.URL(), "dev1-client", "dev1", "")
	dev2 := connect(t, b.URL(), "dev2-client", "dev2", "")
	ops := connect(t, b.URL(), "ops-client", "ops", "")
	var mine, theirs, all, sys collector
	for _, f := range []string{"#", "$SYS/#", "sensors/dev1/#", "$share/g/sensors/#"} {
		if code := subscribe(t, dev2, f, &theirs); code != 0x80 {
			t.Errorf("dev2 subscribing to %s: SUBACK %#x, want 0x80 (refused)", f, code)
		}
	}
	if code := subscribe(t, dev2, "sensors/dev2/#", &mine); code != 1 {
		t.Fatalf("dev2 subscribing to its own subtree: SUBACK %#x", code)
	}
	if code := subscribe(t, ops, "sensors/#", &all); code != 1 {
		t.Fatalf("ops subscribing to sensors/#: SUBACK %#x", code)
	}
	if code := subscribe(t, ops, "$SYS/broker/uptime", &sys); code != 1 {
		t.Fatalf("ops subscribing to $SYS: SUBACK %#x", code)
	}
	if tok := dev1.Publish("sensors/dev1/telemetry", 1, false, "{}"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	await.True(t, 10*time.Second, `len(all.got()) == 1`, func() bool { return len(all.got()) == 1 })
	if tok := dev2.Publish("sensors/dev2/telemetry", 1, false, "{}"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	// dev2's own message comes after dev1's would have: the queue to dev2
	// is in order.
	await.True(t, 10*time.Second, `len(mine.got()) == 1`, func() bool { return len(mine.got()) == 1 })
	// paho hands dev2's own message to every handler whose filter
	// matches, refused or not: only dev1's and $SYS topics tell a leak.
	for _, topic := range theirs.got() {
		if !strings.HasPrefix(topic, "sensors/dev2/") {
			t.Errorf("dev2 received %s through a refused subscription", topic)
		}
	}
	await.True(t, 10*time.Second, `len(all.got()) == 2 && len(sys.got()) > 0`, func() bool { return len(all.got()) == 2 && len(sys.got()) > 0 })
	if n := b.Refused(RefusedACLSubscribe); n != 4 {
		t.Errorf("Refused(acl_subscribe) = %d, want 4", n)
	}
	if n := strings.Count(logs.String(), "msg=\"broker: subscription refused"); n != 4 {
		t.Errorf("%d refusal lines, want 4:\n%s", n, logs.String())
	}
}

// TestBroker_SYSClosedWithoutACLs: without acls every client subscribes
// anywhere but to $SYS.
func TestBroker_SYSClosedWithoutACLs(t *testing.T) {
	b := mustStart(t, Options{})
	c := connect(t, b.URL(), "c", "", "")
	var col collector
	if code := subscribe(t, c, "$SYS/#", &col); code != 0x80 {
		t.Errorf("$SYS/#: SUBACK %#x, want 0x80", code)
	}
	if code := subscribe(t, c, "#", &col); code != 1 {
		t.Errorf("#: SUBACK %#x, want 1", code)
	}
	if n := b.Refused(RefusedACLSubscribe); n != 1 {
		t.Errorf("Refused(acl_subscribe) = %d, want 1", n)
	}
}

// TestBroker_ACLRefusalLogBounded: an MQTT 3.1.1 client's QoS 1 publishes
// of 200 KB outside its acl are refused (disconnected) and counted; the
// log has one bounded line per refusal, naming the client, topic and size,
// and no byte of the payload (mochi's record of the packet is dropped).
func TestBroker_ACLRefusalLogBounded(t *testing.T) {
	b, logs := startLogged(t, Options{ACLs: []ACL{{User: "*", Publish: []string{"sensors/${username}/#"}}}})
	const refusals = 3
	payload := strings.Repeat("7", 200_000)
	for i := range refusals {
		c := connect(t, b.URL(), "intruder", "dev2", "")
		c.Publish("sensors/dev1/telemetry", 1, false, payload) // refused: no PUBACK
		await.True(t, 10*time.Second, `!c.IsConnectionOpen() && b.Refused(RefusedACLPublish) == uint64(i+1)`, func() bool { return !c.IsConnectionOpen() && b.Refused(RefusedACLPublish) == uint64(i+1) })
	}
	out := logs.String()
	if len(out) > refusals*600 {
		t.Errorf("%d refusals logged %d bytes:\n%.2000s", refusals, len(out), out)
	}
	if strings.Contains(out, "7777777777") || strings.Contains(out, "55 55 55") {
		t.Errorf("the payload is in the log:\n%.2000s", out)
	}
	if n := strings.Count(out, "msg=\"broker: publish refused"); n != refusals {
		t.Errorf("%d refusal lines, want %d:\n%q", n, refusals, out)
	}
	for _, want := range []string{"client=intruder", "topic=sensors/dev1/telemetry", "bytes=200000", "reason=acl_publish"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}

// TestBroker_PacketTooLargeCounted: a publish over the packet limit
// (max_message_size plus the topic's room), which mochi cuts off from its
// fixed header, is counted in TooLarge and logged naming its client.
func TestBroker_PacketTooLargeCounted(t *testing.T) {
	b, logs := startLogged(t, Options{MaxMessageSize: 1 << 10})
	c := connect(t, b.URL(), "big-sender", "", "")
	c.Publish("sensors/big", 1, false, strings.Repeat("x", 200<<10))
	await.True(t, 10*time.Second, `b.TooLarge() == 1 && !c.IsConnectionOpen()`, func() bool { return b.TooLarge() == 1 && !c.IsConnectionOpen() })
	out := logs.String()
	if !strings.Contains(out, "client=big-sender") || !strings.Contains(out, "packet limit") {
		t.Errorf("log does not name the client:\n%s", out)
	}
	if strings.Contains(out, `msg=""`) {
		t.Errorf("mochi's own line without a client is logged:\n%s", out)
	}
}

// TestBroker_CredentialsRefusedCounted: a wrong password is counted and
// logged, without the password.
func TestBroker_CredentialsRefusedCounted(t *testing.T) {
	b, logs := startLogged(t, Options{Username: "eddy", Password: "s3cret"})
	if _, err := tryConnect(b.URL(), "guess", "eddy", "hunter2"); err == nil {
		t.Fatal("connected with a wrong password")
	}
	// paho tries MQTT 3.1.1, then 3.1: one or two refusals.
	await.True(t, 10*time.Second, `b.Refused(RefusedCredentials) >= 1`, func() bool { return b.Refused(RefusedCredentials) >= 1 })
	out := logs.String()
	if !strings.Contains(out, "client=guess") || strings.Contains(out, "hunter2") {
		t.Errorf("log:\n%s", out)
	}
}
