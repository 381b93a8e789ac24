package broker

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eddy-edge/eddy/scripts/await"
)

// heldPublish is a deferred publish the test has not completed yet.
type heldPublish struct {
	payload string
	dup     bool
	done    Completion
}

// TestBroker_SubscribeDeferred_OneConnectionBatches pins what the group
// commit relies on: while a QoS 1 publish waits for its Completion, the
// broker keeps reading the same connection, so several of its publishes are
// held at once; none is acknowledged before its Completion, all are
// acknowledged after, and an MQTT subscriber gets each one only then, in
// order.
func TestBroker_SubscribeDeferred_OneConnectionBatches(t *testing.T) {
	b := mustStart(t, Options{})
	held := make(chan heldPublish, 100)
	b.SubscribeDeferred([]string{"sensors/#"}, func(topic string, payload []byte, dup bool, done Completion) {
		held <- heldPublish{string(payload), dup, done}
	})
	var mu sync.Mutex
	var routed []string
	watcher := connect(t, b.URL(), "watcher", "", "")
	if tok := watcher.Subscribe("sensors/#", 1, func(_ paho.Client, m paho.Message) {
		mu.Lock()
		routed = append(routed, string(m.Payload()))
		mu.Unlock()
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}

	pub := connect(t, b.URL(), "pub", "", "")
	const n = 10
	toks := make([]paho.Token, n)
	for i := range n {
		toks[i] = pub.Publish("sensors/a", 1, false, strconv.Itoa(i))
	}
	var got []heldPublish
	for len(got) < n {
		select {
		case h := <-held:
			got = append(got, h)
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of %d publishes of one connection reached the deferred subscriber before any was completed", len(got), n)
		}
	}
	for i, tok := range toks {
		if tok.WaitTimeout(50 * time.Millisecond) {
			t.Fatalf("publish %d acknowledged before its Completion", i)
		}
	}
	mu.Lock()
	if len(routed) != 0 {
		t.Errorf("MQTT subscriber got %v before the Completions", routed)
	}
	mu.Unlock()
	for i, h := range got {
		if h.payload != strconv.Itoa(i) || h.dup {
			t.Fatalf("held publish %d = %q dup=%v", i, h.payload, h.dup)
		}
		h.done.Done(nil)
	}
	for i, tok := range toks {
		if !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %d not acknowledged after its Completion: %v", i, tok.Error())
		}
	}
	await.Until(t, 20*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(routed) != n {
			return fmt.Errorf("MQTT subscriber got %v, want %d messages", routed, n)
		}
		return nil
	})
	for i, p := range routed {
		if p != strconv.Itoa(i) {
			t.Fatalf("routed %v: want 0..%d in order", routed, n-1)
		}
	}
	if tok := pub.Publish("sensors/a", 1, false, "after"); tok.WaitTimeout(50 * time.Millisecond) {
		t.Fatal("a later publish was acknowledged without its Completion")
	}
	(<-held).done.Done(nil)
}

// TestBroker_SubscribeDeferred_RejectRedelivers: a Completion with an error
// leaves the publish unacknowledged and closes the connection; the
// publisher re-sends it, marked DUP, after reconnecting.
func TestBroker_SubscribeDeferred_RejectRedelivers(t *testing.T) {
	b := mustStart(t, Options{})
	held := make(chan heldPublish, 10)
	b.SubscribeDeferred([]string{"#"}, func(topic string, payload []byte, dup bool, done Completion) {
		held <- heldPublish{string(payload), dup, done}
	})
	o := paho.NewClientOptions().AddBroker(b.URL()).SetClientID("retry").
		SetCleanSession(false).SetAutoReconnect(true).SetMaxReconnectInterval(100 * time.Millisecond)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	c.Publish("t", 1, false, "reading")
	first := <-held
	first.done.Done(errors.New("ingest log failed"))
	select {
	case again := <-held:
		if again.payload != "reading" || !again.dup {
			t.Fatalf("re-sent %q dup=%v, want \"reading\" marked DUP", again.payload, again.dup)
		}
		again.done.Done(nil)
	case <-time.After(20 * time.Second):
		t.Fatal("rejected publish never re-sent")
	}
	if b.Rejected() != 1 {
		t.Fatalf("Rejected = %d, want 1", b.Rejected())
	}
}

// TestBroker_SubscribeDeferred_QoS2Waits: publishes the broker cannot defer
// (here QoS 2) still reach a deferred subscriber, and the hook waits for
// the Completion before reading the next one.
func TestBroker_SubscribeDeferred_QoS2Waits(t *testing.T) {
	b := mustStart(t, Options{})
	held := make(chan heldPublish, 10)
	b.SubscribeDeferred([]string{"#"}, func(topic string, payload []byte, dup bool, done Completion) {
		held <- heldPublish{string(payload), dup, done}
	})
	c := connect(t, b.URL(), "q2", "", "")
	c.Publish("t", 2, false, "a")
	c.Publish("t", 2, false, "b")
	h := <-held
	select {
	case h2 := <-held:
		t.Fatalf("second QoS 2 publish %q read while the first was not complete", h2.payload)
	case <-time.After(100 * time.Millisecond):
	}
	h.done.Done(nil)
	select {
	case h2 := <-held:
		if h2.payload != "b" {
			t.Fatalf("second = %q", h2.payload)
		}
		h2.done.Done(nil)
	case <-time.After(20 * time.Second):
		t.Fatal("second QoS 2 publish never arrived")
	}
}

// TestBroker_SubscribeDeferred_QoS0Queued: a QoS 0 publish, which nothing
// acknowledges, is handed to the deferred subscriber without waiting for
// its Completion, so one connection's publishes reach it in order while
// the first is still pending; a failed Completion drops that message,
// counted as rejected, and leaves the connection up.
func TestBroker_SubscribeDeferred_QoS0Queued(t *testing.T) {
	b := mustStart(t, Options{})
	held := make(chan heldPublish, 10)
	b.SubscribeDeferred([]string{"#"}, func(topic string, payload []byte, dup bool, done Completion) {
		held <- heldPublish{string(payload), dup, done}
	})
	c := connect(t, b.URL(), "q0", "", "")
	for _, p := range []string{"a", "b", "c"} {
		c.Publish("t", 0, false, p)
	}
	var pending []heldPublish
	for _, want := range []string{"a", "b", "c"} {
		select {
		case h := <-held:
			if h.payload != want {
				t.Fatalf("got %q, want %q (in publish order)", h.payload, want)
			}
			pending = append(pending, h)
		case <-time.After(20 * time.Second):
			t.Fatalf("QoS 0 publish %q never arrived while earlier ones were pending", want)
		}
	}
	pending[0].done.Done(errors.New("ingest log failed"))
	pending[1].done.Done(nil)
	pending[2].done.Done(nil)
	if b.Rejected() != 1 {
		t.Fatalf("Rejected = %d, want 1", b.Rejected())
	}
	c.Publish("t", 0, false, "d")
	select {
	case h := <-held:
		if h.payload != "d" {
			t.Fatalf("after the drop got %q, want \"d\"", h.payload)
		}
		h.done.Done(nil)
	case <-time.After(20 * time.Second):
		t.Fatal("connection unusable after a dropped QoS 0 publish")
	}
}

// TestBroker_Closed_HoldsConnectionsUntilOpen: with Options.Closed a
// client's CONNACK waits for Open, so nothing it publishes can arrive
// before the subscribers are in place.
func TestBroker_Closed_HoldsConnectionsUntilOpen(t *testing.T) {
	b := mustStart(t, Options{Closed: true})
	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("early").SetAutoReconnect(false).
		SetConnectTimeout(30 * time.Second))
	tok := c.Connect()
	if tok.WaitTimeout(300 * time.Millisecond) {
		t.Fatalf("connected before Open: %v", tok.Error())
	}
	got := make(chan string, 1)
	b.Subscribe([]string{"#"}, func(_ string, p []byte) error { got <- string(p); return nil })
	b.Open()
	if !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("connect after Open: %v", tok.Error())
	}
	defer c.Disconnect(100)
	c.Publish("t", 1, false, "x").Wait()
	if p := <-got; p != "x" {
		t.Fatalf("subscriber got %q", p)
	}
}
