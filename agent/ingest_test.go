package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/io/broker"
	"github.com/eddy-edge/eddy/operators/io/ingest"
	"github.com/eddy-edge/eddy/scripts/await"
)

// startEmbeddedIntake starts an embedded broker on a free loopback port and
// runs embeddedIntake on it ("sensors/#") into a new ingest log in
// after_fsync mode with the given linger. The intake has subscribed when it
// returns, so a sensor connecting then is heard. When the test ends the
// intake is stopped and waited for, then the log and the broker are closed.
func startEmbeddedIntake(t *testing.T, linger time.Duration) (*broker.Broker, *ingest.Log, *logIntake) {
	t.Helper()
	return startEmbeddedIntakeWith(t, linger, broker.Options{}, ingest.Options{})
}

// startEmbeddedIntakeWith is startEmbeddedIntake with the broker's and the
// log's options (Listen and Ack are set here).
func startEmbeddedIntakeWith(t *testing.T, linger time.Duration, bopts broker.Options, iopts ingest.Options) (*broker.Broker, *ingest.Log, *logIntake) {
	t.Helper()
	return startEmbeddedIntakeIn(t, t.TempDir(), linger, bopts, iopts)
}

// startEmbeddedIntakeIn is startEmbeddedIntakeWith with the log in dir.
func startEmbeddedIntakeIn(t *testing.T, dir string, linger time.Duration, bopts broker.Options, iopts ingest.Options) (*broker.Broker, *ingest.Log, *logIntake) {
	t.Helper()
	bopts.Listen = "127.0.0.1:0"
	b, err := broker.Start(bopts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	iopts.Ack = ingest.AfterFsync
	l, err := ingest.Open(dir, iopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	in := &logIntake{log: l, dedup: ingest.NewDedup(ingest.DedupOptions{}), logger: slog.New(slog.DiscardHandler),
		name: "s", linger: linger}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	run := embeddedIntake(b, []string{"sensors/#"}, in) // subscribes before the sensor connects
	wg.Go(func() { run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return b, l, in
}

// TestEmbeddedIntake_OneConnectionSharesCommits publishes QoS 1 readings
// from one sensor connection with many in flight into the embedded broker
// with the ingest log in after_fsync mode and a linger: every reading is in
// the log exactly once and in order once acknowledged, and the commits
// (fsyncs) are far fewer than the readings, because the broker keeps
// reading the connection while a commit is pending. Before deferred
// acknowledgements each reading of one connection was a commit of its own.
func TestEmbeddedIntake_OneConnectionSharesCommits(t *testing.T) {
	b, l, in := startEmbeddedIntake(t, 5*time.Millisecond)

	o := paho.NewClientOptions().AddBroker(b.URL()).SetClientID("sensor").SetAutoReconnect(false).
		SetMaxResumePubInFlight(256)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	const n = 2000
	toks := make([]paho.Token, n)
	for i := range n {
		toks[i] = c.Publish("sensors/s1/telemetry", 1, false, `{"seq":`+strconv.Itoa(i)+`}`)
	}
	for i, tok := range toks {
		if !tok.WaitTimeout(60*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %d not acknowledged: %v", i, tok.Error())
		}
	}
	// Acknowledged means durable: everything is in the log already.
	checkLogHolds(t, l, n, func(i int) string { return `{"seq":` + strconv.Itoa(i) + `}` })
	commits := in.commits.Load()
	t.Logf("%d readings from one connection in %d commits", n, commits)
	if commits > n/4 {
		t.Fatalf("%d commits for %d readings of one connection: the broker did not let them share commits", commits, n)
	}
}

// TestEmbeddedIntake_WaitingSenderNotHeldByLinger: a sensor that waits for
// each PUBACK (an in-flight window of 1, like a full mosquitto window of 20)
// sends nothing while its publish lingers, so the commit starts once the
// intake has been quiet for lingerQuiet instead of at the end of the linger.
// With a 10 s linger, 20 such readings would take over 3 minutes without
// that rule; the test allows 60 s.
func TestEmbeddedIntake_WaitingSenderNotHeldByLinger(t *testing.T) {
	b, _, in := startEmbeddedIntake(t, 10*time.Second)

	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("sequential").SetAutoReconnect(false))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	const n = 20
	start := time.Now()
	for i := range n {
		tok := c.Publish("sensors/s1/telemetry", 1, false, `{"seq":`+strconv.Itoa(i)+`}`)
		if !tok.WaitTimeout(time.Minute-time.Since(start)) || tok.Error() != nil {
			t.Fatalf("publish %d not acknowledged within the test's minute (the linger held a waiting sender): %v", i, tok.Error())
		}
	}
	if got := in.commits.Load(); got != n {
		t.Fatalf("%d commits for %d readings sent one at a time, want one each", got, n)
	}
}

// TestEmbeddedIntake_QoS0SharesCommits: QoS 0 readings of one connection
// are queued for the commit without waiting for it (nothing acknowledges
// them), so they reach the log in order, each once, in far fewer commits
// than readings. While each waited for its commit, one connection got one
// reading per commit: about 40 a second.
func TestEmbeddedIntake_QoS0SharesCommits(t *testing.T) {
	b, l, in := startEmbeddedIntake(t, 5*time.Millisecond)

	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("qos0").SetAutoReconnect(false))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	const n = 2000
	for i := range n {
		c.Publish("sensors/s1/telemetry", 0, false, `{"seq":`+strconv.Itoa(i)+`}`)
	}
	r, err := l.Reader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	i := 0
	await.Until(t, time.Minute, func() error {
		for ; i < n; i++ {
			e, err := r.Next()
			if err == io.EOF {
				return fmt.Errorf("%d of %d QoS 0 readings in the log", i, n)
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"seq":` + strconv.Itoa(i) + `}`; string(e.Payload) != want {
				t.Fatalf("entry %d = %s, want %s", i, e.Payload, want)
			}
		}
		return nil
	})
	commits := in.commits.Load()
	t.Logf("%d QoS 0 readings from one connection in %d commits", n, commits)
	if commits > n/4 {
		t.Fatalf("%d commits for %d QoS 0 readings of one connection: each waited for its own commit", commits, n)
	}
}

// checkLogHolds fails the test unless l holds exactly n entries on
// "sensors/s1/telemetry", the i-th with payload(i): all acknowledged
// readings, in order, none twice.
func checkLogHolds(t *testing.T, l *ingest.Log, n int, payload func(int) string) {
	t.Helper()
	r, err := l.Reader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range n {
		e, err := r.Next()
		if err != nil {
			t.Fatalf("entry %d: %v (acknowledged but not in the log)", i, err)
		}
		if want := payload(i); string(e.Payload) != want || string(e.Topic) != "sensors/s1/telemetry" {
			t.Fatalf("entry %d = %s %.40s…, want %.40s…", i, e.Topic, e.Payload, want)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after %d entries: %v, want io.EOF (no duplicates)", n, err)
	}
}

// TestIngestOptions_Compression: ingest { compression } picks the log's
// codec.
func TestIngestOptions_Compression(t *testing.T) {
	for _, tt := range []struct {
		setting string
		want    ingest.Compression
	}{
		{config.IngestCompressionZstd, ingest.CompressZstd},
		{config.IngestCompressionS2, ingest.CompressS2},
		{config.IngestCompressionNone, ingest.CompressNone},
	} {
		t.Run(tt.setting, func(t *testing.T) {
			ic := config.Ingest{Ack: config.AckAfterFsync, MaxDiskBytes: 1 << 30, Compression: tt.setting}
			if got := ingestOptions(ic, nil).Compression; got != tt.want {
				t.Fatalf("compression %q: %v, want %v", tt.setting, got, tt.want)
			}
		})
	}
}
