package e2e

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// embeddedCrashConfig is mqttCrashConfig with the embedded broker as the
// source: the sensors publish to the agent itself, whose publish hook defers
// QoS 1 acknowledgements to the ingest log's group commit.
func embeddedCrashConfig(brokerAddr string) string {
	cfg := strings.Replace(mqttCrashConfig, `source "mqtt" "sensors" {
  broker    = "%BROKER%"
  client_id = "%CLIENT%"`, `source "mqtt" "sensors" {
  broker    = "embedded"`, 1)
	return "broker { listen = \"" + brokerAddr + "\" }\n" + cfg
}

func newEmbeddedCrashRun(t *testing.T, brokerAddr string) *mqttCrashRun {
	r := newCrashRun(t, embeddedCrashConfig(brokerAddr))
	r.ready = func() bool { return healthzStatus(r.admin) == http.StatusOK }
	return r
}

// reconnectingSensor publishes like sendReadings, as a sensor that keeps
// its session (clean session off): when its connection breaks (the agent
// was killed) it connects again with a new paho client on the same message
// store, which re-sends every publish not yet acknowledged, marked DUP. (A
// new client per connection, not paho's auto-reconnect, whose successive
// reconnects race with each other under the race detector.)
type reconnectingSensor struct {
	url, id string
	store   paho.Store
	mu      sync.Mutex
	c       paho.Client
	lost    chan struct{}
}

func newReconnectingSensor(url, id string) *reconnectingSensor {
	return &reconnectingSensor{url: url, id: id, store: paho.NewMemoryStore()}
}

// connect connects a new client, retrying for up to a minute (the agent
// may be restarting).
func (s *reconnectingSensor) connect() error {
	return await.Within(time.Minute, func() error {
		lost := make(chan struct{})
		o := paho.NewClientOptions().AddBroker(s.url).SetClientID(s.id).SetCleanSession(false).
			SetAutoReconnect(false).SetStore(s.store).SetMaxResumePubInFlight(1000).
			SetConnectionLostHandler(func(paho.Client, error) { close(lost) })
		c := paho.NewClient(o)
		tok := c.Connect()
		if !tok.WaitTimeout(10 * time.Second) {
			return errors.New("connect not answered within 10 s")
		}
		if err := tok.Error(); err != nil {
			return err
		}
		s.mu.Lock()
		s.c, s.lost = c, lost
		s.mu.Unlock()
		return nil
	})
}

// publish publishes a batch and waits for its acknowledgements. When the
// connection breaks meanwhile, it connects again (the new client re-sends
// what was sent but not acknowledged) and publishes anew only what paho
// refused without storing (ErrNotConnected): never a message twice.
func (s *reconnectingSensor) publish(topics, payloads []string) error {
	for len(topics) > 0 {
		s.mu.Lock()
		c, lost := s.c, s.lost
		s.mu.Unlock()
		toks := make([]paho.Token, len(topics))
		for i := range topics {
			toks[i] = c.Publish(topics[i], 1, false, payloads[i])
		}
		broke := false
		var retryT, retryP []string
		for i, tok := range toks {
			if !broke {
				select {
				case <-tok.Done():
				case <-lost:
					broke = true
				case <-time.After(60 * time.Second):
					return errors.New("publish not acknowledged within 60 s")
				}
			}
			select {
			case <-tok.Done():
				if errors.Is(tok.Error(), paho.ErrNotConnected) {
					retryT, retryP = append(retryT, topics[i]), append(retryP, payloads[i])
				}
			default: // sent and stored: the next connection re-sends it
			}
		}
		if len(retryT) > 0 && !broke {
			<-lost // refused as not connected: the loss is being reported
			broke = true
		}
		if broke {
			c.Disconnect(0)
			if err := s.connect(); err != nil {
				return err
			}
		}
		topics, payloads = retryT, retryP
	}
	return nil
}

func (s *reconnectingSensor) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.Disconnect(100)
}

// sendReadingsReconnecting publishes the readings of sendReadings through a
// reconnectingSensor. It returns the sensor, which must stay connected until
// the output is complete: a publish whose connection broke is re-sent only
// on the next connection.
func sendReadingsReconnecting(url, client string, readings, devices int) (*reconnectingSensor, error) {
	s := newReconnectingSensor(url, client)
	if err := s.connect(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(11, 12))
	base := int64(1_700_000_000_000)
	const batch = 500
	for i := 0; i < readings; i += batch {
		var topics, payloads []string
		for j := i; j < i+batch && j < readings; j++ {
			d := j % devices
			ts := base + int64(j)*5 + rng.Int64N(3000)
			topics = append(topics, "sensors/"+strconv.Itoa(d)+"/telemetry")
			payloads = append(payloads, `{"device":"dev-`+strconv.Itoa(d)+`","ts":`+strconv.FormatInt(ts, 10)+`,"v":`+strconv.Itoa(rng.IntN(100))+`}`)
		}
		if err := s.publish(topics, payloads); err != nil {
			return s, err
		}
	}
	flush := `{"device":"flush","ts":` + strconv.FormatInt(base+int64(readings)*5+3_600_000, 10) + `,"v":0}`
	return s, s.publish([]string{"sensors/flush/telemetry"}, []string{flush})
}

// TestCrash_EmbeddedBrokerExactlyOnce: sensors publish at QoS 1 with many
// publishes in flight to the agent's embedded broker, which acknowledges
// them only after the ingest log's commit; the agent is SIGKILLed at random
// moments while they publish and restarted, the sensor re-sends what was not
// acknowledged; the exactly-once file sink's committed output, last firing
// per (key, window), equals an uninterrupted run's, with no duplicated
// record.
func TestCrash_EmbeddedBrokerExactlyOnce(t *testing.T) {
	t.Parallel()
	readings, devices, kills := crashScale()

	cleanAddr := loopback.Addr(t)
	clean := newEmbeddedCrashRun(t, cleanAddr)
	clean.start()
	pub, err := sendReadingsReconnecting("tcp://"+cleanAddr, "pub-clean", readings, devices)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.close()
	want := clean.finalResults(len(expectedWindows(readings, devices)))
	if len(want) < devices {
		t.Fatalf("uninterrupted run produced %d windows", len(want))
	}

	addr := loopback.Addr(t)
	crashed := newEmbeddedCrashRun(t, addr)
	crashed.start()
	var wg sync.WaitGroup
	var pubErr error
	var sensor *reconnectingSensor
	published := make(chan struct{})
	wg.Go(func() {
		sensor, pubErr = sendReadingsReconnecting("tcp://"+addr, "pub-crashed", readings, devices)
		close(published)
	})
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	during := 0
	for k := 0; k < kills; k++ {
		select {
		case <-published:
		case <-time.After(time.Duration(200+rng.IntN(800)) * time.Millisecond):
			during++
		}
		crashed.kill()
		crashed.start()
	}
	wg.Wait()
	if pubErr != nil {
		t.Fatalf("publisher: %v", pubErr)
	}
	defer sensor.close() // after the output is complete: it may still re-send
	got := crashed.finalResults(len(want))
	sameWindows(t, want, got, kills)
	t.Logf("%d readings, %d kills (%d while the sensor was publishing): %d windows identical to the uninterrupted run, no duplicate records",
		readings, kills, during, len(want))
}
