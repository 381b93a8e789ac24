package walsink

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// TestSink_Offline_Block: with the upstream broker down, the WAL fills up
// to MaxDiskBytes and Write blocks (backpressure); once the broker is back
// the backlog drains and nothing is lost (the disk-budget test).
func TestSink_Offline_Block(t *testing.T) { forUpstreams(t, testOfflineBlock) }

func testOfflineBlock(t *testing.T, b *mosquitto.Broker, u upstream) {
	maxInflight := u.maxInflight
	c := startCollector(t, b.URL(), "up/#")
	b.Stop()
	const maxDisk = 256 << 10
	s := mustOpen(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-" + sanitize(t.Name()), MaxInflight: maxInflight, ProtocolVersion: u.version,
		ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond,
		MaxDiskBytes: maxDisk, SegmentBytes: 32 << 10, WhenFull: Block})
	type result struct {
		ids []string
	}
	done := make(chan result, 1)
	go func() { done <- result{writeEpochs(t, s, 1, 40, 100)} }() // ~560 KiB of output
	// Wait until Write is blocked on the full WAL.
	await.Until(t, 20*time.Second, func() error {
		if st := s.Stats(); st.WALBytes <= maxDisk-8<<10 {
			return fmt.Errorf("WAL never filled: %+v", st)
		}
		return nil
	})
	await.Never(t, 300*time.Millisecond, func() error {
		select {
		case <-done:
			return errors.New("writes finished with the broker down and the WAL full: no backpressure")
		default:
			return nil
		}
	})
	st := s.Stats()
	if st.WALBytes > maxDisk {
		t.Errorf("WAL %d bytes over max_disk %d while blocked", st.WALBytes, maxDisk)
	}
	if st.Dropped != 0 || st.Delivered != 0 {
		t.Errorf("stats while offline: %+v", st)
	}
	b.Restart()
	var want []string
	select {
	case r := <-done:
		want = r.ids
	case <-time.After(60 * time.Second):
		t.Fatal("writes still blocked after the broker came back")
	}
	c.waitFor(t, len(want), 60*time.Second)
	waitDrained(t, s, 10*time.Second)
	c.noMoreThan(t, len(want), 200*time.Millisecond)
	checkExactlyOnce(t, c.received(), want)
}

// TestSink_Offline_DropOldest: with the broker down and the WAL full,
// drop_oldest drops the oldest unsent messages and counts exactly what it
// dropped: received + dropped = written, no duplicates, order kept.
func TestSink_Offline_DropOldest(t *testing.T) { forUpstreams(t, testOfflineDropOldest) }

func testOfflineDropOldest(t *testing.T, b *mosquitto.Broker, u upstream) {
	maxInflight := u.maxInflight
	c := startCollector(t, b.URL(), "up/#")
	b.Stop()
	const maxDisk = 256 << 10
	s := mustOpen(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-" + sanitize(t.Name()), MaxInflight: maxInflight, ProtocolVersion: u.version,
		ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond,
		MaxDiskBytes: maxDisk, SegmentBytes: 32 << 10, WhenFull: DropOldest})
	want := writeEpochs(t, s, 1, 40, 100)
	st := s.Stats()
	if st.Dropped == 0 {
		t.Fatalf("nothing dropped: %+v", st)
	}
	if st.WALBytes > maxDisk {
		t.Errorf("WAL %d bytes over max_disk %d", st.WALBytes, maxDisk)
	}
	if got := int64(len(want)) - int64(st.Dropped); st.BacklogMessages != got {
		t.Errorf("backlog %d, want written %d - dropped %d", st.BacklogMessages, len(want), st.Dropped)
	}
	b.Restart()
	n := len(want) - int(st.Dropped)
	c.waitFor(t, n, 60*time.Second)
	waitDrained(t, s, 10*time.Second)
	c.noMoreThan(t, n, 300*time.Millisecond)
	got := c.received()
	if len(got) != n {
		t.Errorf("received %d, want %d written - %d dropped = %d", len(got), len(want), st.Dropped, n)
	}
	// What arrived is the newest part, each once, in order.
	checkExactlyOnce(t, got, want[len(want)-n:])
	t.Logf("dropped %d of %d", st.Dropped, len(want))
}

// TestSink_DrainRate: a committed backlog drains at no more than DrainRate
// messages per second (with a tenth of a second's burst).
func TestSink_DrainRate(t *testing.T) { forUpstreams(t, testDrainRate) }

func testDrainRate(t *testing.T, b *mosquitto.Broker, u upstream) {
	maxInflight := u.maxInflight
	c := startCollector(t, b.URL(), "up/#")
	b.Stop()
	const rate = 1000
	s := mustOpen(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-" + sanitize(t.Name()), MaxInflight: maxInflight, ProtocolVersion: u.version,
		ReconnectMin: 20 * time.Millisecond, ReconnectMax: 50 * time.Millisecond, DrainRate: rate})
	want := writeEpochs(t, s, 1, 3, 500)
	b.Restart()
	waitDelivered(t, s, 1, 10*time.Second)
	start := time.Now()
	waitDrained(t, s, 30*time.Second)
	elapsed := time.Since(start)
	minimum := time.Duration(float64(len(want)-rate/10-1) / rate * float64(time.Second))
	if elapsed < minimum*9/10 || elapsed > minimum*2 {
		t.Errorf("drained %d messages at %d/s in %v, want about %v", len(want), rate, elapsed, minimum)
	}
	c.waitFor(t, len(want), 10*time.Second)
	checkExactlyOnce(t, c.received(), want)
	t.Logf("%d messages in %v at drain_rate %d/s", len(want), elapsed, rate)
}

// TestSink_DefaultBroker_DeliversAll: 200,000 results through a mosquitto
// with its default configuration (20 messages in flight per client) reach
// a subscriber, every one once and in order. With more flows in flight than
// the broker takes, mosquitto completes the handshake of the excess and
// drops their messages silently (about half of them, measured with a
// window of 100), so this is what the sink's default window is for.
func TestSink_DefaultBroker_DeliversAll(t *testing.T) {
	b := mosquitto.Start(t, mosquitto.DefaultInflight())
	c := startCollector(t, b.URL(), "up/#")
	s := mustOpen(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-" + t.Name(), MaxDiskBytes: 1 << 30})
	start := time.Now()
	want := writeEpochs(t, s, 1, 200, 1000)
	got := c.waitFor(t, len(want), 5*time.Minute)
	t.Logf("%d results delivered in %v (%.0f/s); stats %+v", len(got), time.Since(start),
		float64(len(got))/time.Since(start).Seconds(), s.Stats())
	waitDrained(t, s, 10*time.Second)
	checkExactlyOnce(t, c.received(), want)
}

// TestSink_WaitDelivered: with the broker down, WaitDelivered gives up when
// its context ends and returns the committed, undelivered count (data of an
// epoch not committed is neither waited for nor counted); with the broker
// back it returns 0 once the last committed message is delivered.
func TestSink_WaitDelivered(t *testing.T) {
	b := mosquitto.Start(t, mosquitto.DefaultInflight())
	c := startCollector(t, b.URL(), "up/#")
	b.Stop()
	s := mustOpen(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-" + t.Name(),
		ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond})
	want := writeEpochs(t, s, 1, 5, 100)
	if err := s.Write(6, msgs(6, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.PreCommit(6); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if n, err := s.WaitDelivered(ctx); n != int64(len(want)) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitDelivered with the broker down = %d, %v; want %d, DeadlineExceeded", n, err, len(want))
	}
	b.Restart()
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if n, err := s.WaitDelivered(ctx); n != 0 || err != nil {
		t.Fatalf("WaitDelivered with the broker up = %d, %v; want 0, nil", n, err)
	}
	if st := s.Stats(); st.Delivered != uint64(len(want)) {
		t.Errorf("WaitDelivered returned with %d of %d delivered", st.Delivered, len(want))
	}
	checkExactlyOnce(t, c.waitFor(t, len(want), 10*time.Second), want)
}
