package broker

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/mochi-mqtt/server/v2/packets"
)

// mustStart starts a broker on a free loopback port and closes it at the end
// of the test.
func mustStart(t testing.TB, opts Options) *Broker {
	t.Helper()
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	b, err := Start(opts, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// connect returns a connected paho client; it fails the test on error.
func connect(t testing.TB, url, id, user, pass string) paho.Client {
	t.Helper()
	c, err := tryConnect(url, id, user, pass)
	if err != nil {
		t.Fatalf("connect %s: %v", id, err)
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}

func tryConnect(url, id, user, pass string) (paho.Client, error) {
	o := paho.NewClientOptions().AddBroker(url).SetClientID(id).
		SetUsername(user).SetPassword(pass).SetAutoReconnect(false).
		SetConnectTimeout(5 * time.Second)
	c := paho.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(10 * time.Second) {
		return nil, errors.New("connect timed out")
	}
	return c, tok.Error()
}

func TestStart_Listen(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr error // nil: must start
	}{
		{"loopback v4", Options{Listen: "127.0.0.1:0"}, nil},
		{"localhost", Options{Listen: "localhost:0"}, nil},
		{"loopback v6", Options{Listen: "[::1]:0"}, nil},
		{"all interfaces", Options{Listen: ":0"}, ErrInsecureListen},
		{"unspecified v4", Options{Listen: "0.0.0.0:0"}, ErrInsecureListen},
		{"username only", Options{Listen: "0.0.0.0:0", Username: "u"}, ErrInsecureListen},
		{"with credentials", Options{Listen: "0.0.0.0:0", Username: "u", Password: "p"}, nil},
		{"TLS without client certificates", Options{Listen: "0.0.0.0:0", TLS: &tls.Config{}}, ErrInsecureListen},
		{"TLS verifying client certificates", Options{Listen: "0.0.0.0:0",
			TLS: &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: x509.NewCertPool(), GetCertificate: noCertificate}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Start(tt.opts, nil)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Start = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				if strings.Contains(err.Error(), "cannot assign") { // no IPv6 on this host
					t.Skip(err)
				}
				t.Fatalf("Start: %v", err)
			}
			defer b.Close()
			if strings.HasSuffix(b.Addr(), ":0") || !strings.HasPrefix(b.URL(), "tcp://") {
				t.Fatalf("Addr %q URL %q: want the bound port", b.Addr(), b.URL())
			}
		})
	}
}

func TestStart_BadOptions(t *testing.T) {
	for _, opts := range []Options{
		{Listen: "127.0.0.1"},
		{Listen: "127.0.0.1:0", Password: "p"},
		{Listen: "127.0.0.1:0", MaxInflight: 70000},
	} {
		if b, err := Start(opts, nil); err == nil {
			b.Close()
			t.Errorf("Start(%+v) succeeded, want an error", opts)
		}
	}
}

func TestBroker_Auth(t *testing.T) {
	b := mustStart(t, Options{Username: "eddy", Password: "s3cret"})
	tests := []struct {
		user, pass string
		ok         bool
	}{
		{"eddy", "s3cret", true},
		{"eddy", "wrong", false},
		{"other", "s3cret", false},
		{"", "", false},
	}
	for i, tt := range tests {
		c, err := tryConnect(b.URL(), "auth-"+strconv.Itoa(i), tt.user, tt.pass)
		if (err == nil) != tt.ok {
			t.Errorf("connect as %q/%q: err = %v, want ok=%v", tt.user, tt.pass, err, tt.ok)
		}
		if c != nil && err == nil {
			c.Disconnect(100)
		}
	}
}

// TestBroker_Subscribe_InOrderPerPublisher publishes from several paho
// clients at QoS 0, 1 and 2 at once, without waiting for each token, and
// expects every message exactly once and in publish order per publisher.
func TestBroker_Subscribe_InOrderPerPublisher(t *testing.T) {
	b := mustStart(t, Options{})
	const perPublisher = 3000
	var mu sync.Mutex
	got := map[string][]int{}
	unsubscribe := b.Subscribe([]string{"sensors/+/telemetry"}, func(topic string, payload []byte) error {
		pub, seq, _ := strings.Cut(string(payload), ":")
		n, err := strconv.Atoi(seq)
		if err != nil {
			t.Errorf("payload %q: %v", payload, err)
		}
		mu.Lock()
		got[pub] = append(got[pub], n)
		mu.Unlock()
		return nil
	})
	defer unsubscribe()
	// Not matching: must not reach the subscriber.
	other := connect(t, b.URL(), "other", "", "")
	other.Publish("sensors/x/status", 1, false, "ignored").Wait()

	var wg sync.WaitGroup
	for _, qos := range []byte{0, 1, 2} {
		for p := range 2 {
			name := fmt.Sprintf("q%d-p%d", qos, p)
			c := connect(t, b.URL(), name, "", "")
			wg.Go(func() {
				var last paho.Token
				for i := range perPublisher {
					last = c.Publish("sensors/"+name+"/telemetry", qos, false, name+":"+strconv.Itoa(i))
				}
				if !last.WaitTimeout(30*time.Second) || last.Error() != nil {
					t.Errorf("%s: last publish: %v", name, last.Error())
				}
				// QoS 0 has no acknowledgement: a QoS 1 round trip on the same
				// connection flushes everything sent before it.
				if tok := c.Publish("flush", 1, false, "x"); !tok.WaitTimeout(30 * time.Second) {
					t.Errorf("%s: flush timed out", name)
				}
			})
		}
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 6 {
		t.Fatalf("got messages from %d publishers, want 6: %v", len(got), len(got))
	}
	for pub, seqs := range got {
		if len(seqs) != perPublisher {
			t.Errorf("%s: %d messages, want %d", pub, len(seqs), perPublisher)
		}
		for i, n := range seqs {
			if n != i {
				t.Errorf("%s: message %d has seq %d: out of order or duplicated", pub, i, n)
				break
			}
		}
	}
}

// TestBroker_Subscribe_RejectRedelivers checks that a rejected QoS 1 publish
// is not acknowledged: the publisher is disconnected and re-sends the same
// message on reconnect, which then reaches the subscriber.
func TestBroker_Subscribe_RejectRedelivers(t *testing.T) {
	b := mustStart(t, Options{})
	var calls atomic.Int32
	accepted := make(chan string, 10)
	b.Subscribe([]string{"#"}, func(topic string, payload []byte) error {
		if calls.Add(1) == 1 {
			return errors.New("ingest log full")
		}
		accepted <- string(payload)
		return nil
	})
	o := paho.NewClientOptions().AddBroker(b.URL()).SetClientID("retry").
		SetCleanSession(false).SetAutoReconnect(true).SetMaxReconnectInterval(100 * time.Millisecond)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	// paho completes the first token when it re-sends on reconnect (its
	// claimID), so the subscriber's channel is the evidence, not the token.
	c.Publish("t", 1, false, "reading")
	select {
	case p := <-accepted:
		if p != "reading" {
			t.Fatalf("accepted %q", p)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("rejected publish never re-sent and accepted (calls %d)", calls.Load())
	}
	if b.Rejected() != 1 {
		t.Fatalf("Rejected = %d, want 1", b.Rejected())
	}
}

func TestBroker_Unsubscribe(t *testing.T) {
	b := mustStart(t, Options{})
	var n atomic.Int32
	unsubscribe := b.Subscribe([]string{"a", "a/#"}, func(string, []byte) error { n.Add(1); return nil })
	c := connect(t, b.URL(), "pub", "", "")
	c.Publish("a", 1, false, "1").Wait()
	unsubscribe()
	unsubscribe()
	c.Publish("a", 1, false, "2").Wait()
	if n.Load() != 1 {
		t.Fatalf("subscriber called %d times, want 1 (once per message, none after unsubscribe)", n.Load())
	}
}

// TestBroker_Subscribe_BeforeAck pins the ordering the ingest log relies on:
// the publisher is not acknowledged while the subscriber is still running.
func TestBroker_Subscribe_BeforeAck(t *testing.T) {
	b := mustStart(t, Options{})
	entered := make(chan struct{})
	release := make(chan struct{})
	b.Subscribe([]string{"t"}, func(string, []byte) error {
		close(entered)
		<-release
		return nil
	})
	c := connect(t, b.URL(), "pub", "", "")
	tok := c.Publish("t", 1, false, "x")
	<-entered
	if tok.WaitTimeout(100 * time.Millisecond) {
		t.Fatal("publish acknowledged while the subscriber was still running")
	}
	close(release)
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish not acknowledged after the subscriber returned: %v", tok.Error())
	}
}

// noCertificate stands in for a server certificate in tests that never
// complete a handshake.
func noCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return nil, errors.New("no certificate in this test")
}

// TestBroker_OversizedPublishMQTT5 speaks MQTT 5 on a raw connection: the
// CONNACK carries the broker's maximum packet size, and a publish whose
// payload exceeds MaxMessageSize gets a DISCONNECT with reason 0x95
// (packet too large) and is counted.
func TestBroker_OversizedPublishMQTT5(t *testing.T) {
	b := mustStart(t, Options{MaxMessageSize: 100})
	conn, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// CONNECT: "MQTT", level 5, clean start, keepalive 30, no properties, client id "v5".
	connect := []byte{0x10, 15, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x02, 0, 30, 0, 0, 2, 'v', '5'}
	if _, err := conn.Write(connect); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	typ, body := readPacket(t, r)
	if typ != 0x20 || len(body) < 3 || body[1] != 0 {
		t.Fatalf("CONNACK: type %#x body %v", typ, body)
	}
	var props packets.Properties
	if _, err := props.Decode(packets.Connack, bytes.NewBuffer(body[2:])); err != nil {
		t.Fatalf("CONNACK properties: %v", err)
	}
	if props.MaximumPacketSize == 0 {
		t.Error("CONNACK tells no maximum packet size")
	}
	// PUBLISH QoS 1, topic "t", packet id 1, no properties, 200-byte payload.
	payload := strings.Repeat("x", 200)
	pub := []byte{0x32}
	rest := append([]byte{0, 1, 't', 0, 1, 0}, payload...)
	pub = append(pub, byte(len(rest)&0x7f|0x80), byte(len(rest)>>7))
	pub = append(pub, rest...)
	if _, err := conn.Write(pub); err != nil {
		t.Fatal(err)
	}
	typ, body = readPacket(t, r)
	if typ != 0xe0 || len(body) < 1 || body[0] != 0x95 {
		t.Fatalf("after an oversized publish: type %#x body %v, want DISCONNECT 0x95", typ, body)
	}
	if b.TooLarge() != 1 {
		t.Errorf("TooLarge = %d, want 1", b.TooLarge())
	}
}

// readPacket reads one MQTT packet: its type byte and body.
func readPacket(t *testing.T, r *bufio.Reader) (byte, []byte) {
	t.Helper()
	typ, err := r.ReadByte()
	if err != nil {
		t.Fatal(err)
	}
	n, shift := 0, 0
	for {
		c, err := r.ReadByte()
		if err != nil {
			t.Fatal(err)
		}
		n |= int(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			break
		}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal(err)
	}
	return typ, body
}

// TestBroker_MalformedSubscribeContained: an MQTT 5 SUBSCRIBE whose filter
// lacks its options byte makes mochi index past the packet; the panic ends
// that connection only, and the broker goes on serving.
func TestBroker_MalformedSubscribeContained(t *testing.T) {
	b := mustStart(t, Options{})
	conn, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hello := []byte{0x10, 15, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x02, 0, 30, 0, 0, 2, 'v', '5'}
	// SUBSCRIBE: packet id 1, no properties, filter "#" and no options byte.
	subscribe := []byte{0x82, 0x06, 0x00, 0x01, 0x00, 0x00, 0x01, '#'}
	if _, err := conn.Write(append(hello, subscribe...)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.Copy(io.Discard, conn) // the broker closes the connection
	// The connection can close before the recover that counts the panic
	// has run: wait for the count.
	_ = await.Holds(10*time.Second, func() bool { return b.Panics() == 1 })
	if b.Panics() != 1 {
		t.Fatalf("Panics = %d, want the malformed packet's 1", b.Panics())
	}
	c := connect(t, b.URL(), "after", "", "")
	if !c.IsConnected() {
		t.Fatal("the broker serves no client after the malformed packet")
	}
}

// TestBroker_Internal: the internal endpoint is a loopback listener of its
// own that lets in exactly its credentials, whatever the main listener
// asks (here a username and password, and an ACL that lets no one
// publish); its clients publish anywhere. The main listener does not take
// the internal credentials, nor the internal listener the sensors'.
func TestBroker_Internal(t *testing.T) {
	b := mustStart(t, Options{Username: "sensor", Password: "s3cret",
		ACLs: []ACL{{User: "nobody", Publish: []string{"none/#"}}}})
	in := b.Internal()
	host, _, err := net.SplitHostPort(strings.TrimPrefix(in.URL, "tcp://"))
	if err != nil || host != "127.0.0.1" || in.URL == b.URL() {
		t.Fatalf("Internal().URL = %q (main %q), want its own 127.0.0.1 port", in.URL, b.URL())
	}
	if in.Username != InternalUsername || len(in.Password) < 32 {
		t.Fatalf("Internal() credentials %q/%d chars, want %q and a 128-bit secret", in.Username, len(in.Password), InternalUsername)
	}
	tests := []struct {
		name, url, user, pass string
		ok                    bool
	}{
		{"internal credentials", in.URL, in.Username, in.Password, true},
		{"internal, wrong password", in.URL, in.Username, "wrong", false},
		{"internal, no credentials", in.URL, "", "", false},
		{"internal, the sensors' credentials", in.URL, "sensor", "s3cret", false},
		{"main listener, internal credentials", b.URL(), in.Username, in.Password, false},
	}
	for i, tt := range tests {
		c, err := tryConnect(tt.url, "internal-"+strconv.Itoa(i), tt.user, tt.pass)
		if (err == nil) != tt.ok {
			t.Errorf("%s: err = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if c != nil && err == nil {
			c.Disconnect(100)
		}
	}

	got := make(chan string, 1)
	b.Subscribe([]string{"results/#"}, func(topic string, _ []byte) error {
		got <- topic
		return nil
	})
	c := connect(t, in.URL, "internal-pub", in.Username, in.Password)
	if tok := c.Publish("results/a", 1, false, "{}"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish through the internal listener: %v", tok.Error())
	}
	if topic := <-got; topic != "results/a" {
		t.Fatalf("subscriber got %q", topic)
	}
}
