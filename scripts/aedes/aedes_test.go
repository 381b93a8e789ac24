package aedes

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eddy-edge/eddy/scripts/await"
)

// TestBroker_ResumedSessionKeepsStoredMessages: a QoS 1 subscriber with a
// persistent session gets, after it reconnects, every message published
// while it was away, and the messages published after it reconnected too.
// The order it gets them in is aedes' own (logged, not asserted).
func TestBroker_ResumedSessionKeepsStoredMessages(t *testing.T) {
	b := Start(t)
	var (
		mu   sync.Mutex
		got  []int
		seen = map[int]bool{}
	)
	sub := func() paho.Client {
		opts := paho.NewClientOptions().AddBroker(b.URL()).SetClientID("sub").SetCleanSession(false).SetOrderMatters(true).
			SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
				n, _ := strconv.Atoi(string(m.Payload()))
				mu.Lock()
				if !seen[n] {
					seen[n] = true
					got = append(got, n)
				}
				mu.Unlock()
			})
		c := paho.NewClient(opts)
		if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("connect: %v", tok.Error())
		}
		return c
	}
	c := sub()
	if tok := c.Subscribe("t/#", 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	c.Disconnect(100)

	pub := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("pub"))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	const stored, live = 200, 200
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			if tok := pub.Publish("t/x", 1, false, strconv.Itoa(i)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Errorf("publish %d: %v", i, tok.Error())
				return
			}
		}
	}
	publish(0, stored)
	c = sub()
	defer c.Disconnect(100)
	publish(stored, stored+live)
	await.Until(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if n := len(got); n != stored+live {
			return fmt.Errorf("got %d of %d messages", n, stored+live)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	behind := 0
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] {
			behind++
		}
	}
	t.Logf("first 10 after the resume: %v; %d messages behind a newer one", got[:10], behind)
	b.Stop()
	if c, err := net.Dial("tcp", b.Addr()); err == nil {
		c.Close()
		t.Fatalf("broker still listening on %s after Stop", b.Addr())
	}
}

// TestBroker_LogPublishesAcrossRestart: with LogPublishes, a QoS 2 message
// is in the log once it is acknowledged (aedes publishes on receipt), each
// process's part of the log starts with its listening line, and Restart
// starts a process that has forgotten every session.
func TestBroker_LogPublishesAcrossRestart(t *testing.T) {
	b := Start(t, LogPublishes("results/#"))
	// connect connects a client with a persistent session, subscribed to
	// results/#, and reports whether the broker had its session.
	connect := func(id string) (paho.Client, bool) {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID(id).SetCleanSession(false))
		tok := c.Connect()
		if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("connect: %v", tok.Error())
		}
		if tok := c.Subscribe("results/#", 2, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("subscribe: %v", tok.Error())
		}
		return c, tok.(*paho.ConnectToken).SessionPresent()
	}
	publish := func(payload string) (present bool) {
		c, present := connect("pub")
		defer c.Disconnect(100)
		for _, topic := range []string{"results/x", "other/x"} {
			if tok := c.Publish(topic, 2, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatalf("publish: %v", tok.Error())
			}
		}
		return present
	}
	publish("one")
	if !strings.Contains(b.Log(), "published results/x one") {
		t.Fatalf("not logged once acknowledged:\n%s", b.Log())
	}
	if !publish("two") {
		t.Errorf("the first process forgot the session")
	}
	b.Restart()
	if publish("three") {
		t.Errorf("session present after Restart")
	}
	log := b.Log()
	parts := strings.Split(log, "aedes listening on")
	if len(parts) != 3 || !strings.Contains(parts[1], "results/x two") || !strings.Contains(parts[2], "published results/x three") {
		t.Fatalf("want two processes' parts, the second with the third message:\n%s", log)
	}
	if strings.Count(log, "published ") != 3 {
		t.Fatalf("want 3 messages logged (results/# only):\n%s", log)
	}
}
