package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/operators/io/walsink"
)

// Sparkplug is one sink "sparkplug" to probe.
type Sparkplug struct {
	Sink string
	// Endpoint is the sink's own; the probe appends "-probe" to its
	// client id (and walsink.ProbeAnnounced "-limits" to that).
	Endpoint                 Endpoint
	Group, Node, PrimaryHost string
}

// SparkplugObservations is what the probe saw of a Sparkplug sink's broker.
type SparkplugObservations struct {
	// Announced is what an MQTT 5 CONNACK announced; nil when the broker
	// speaks MQTT 3.1.1 only.
	Announced *walsink.Announced `json:"announced,omitempty"`
	// Granted is the QoS the broker granted each of the node's
	// subscriptions (NCMD, and the primary host's STATE); 0x80 refused.
	Granted map[string]int `json:"granted"`
	// HostState is the primary host's retained STATE: "online",
	// "offline", "none" (nothing retained) or "" (no primary host).
	HostState string `json:"primary_host_state,omitempty"`
}

// SparkplugResult is a Sparkplug sink's probe with its findings.
type SparkplugResult struct {
	Sink     string                `json:"sink"`
	Broker   string                `json:"broker"`
	Node     string                `json:"node"`
	Observed SparkplugObservations `json:"observed"`
	Findings []Finding             `json:"findings"`
}

// hostStateWait is how long the probe waits for a retained STATE, which
// a broker sends right after the SUBACK.
const hostStateWait = 2 * time.Second

// ProbeSparkplug connects to s's broker as s's node does, in MQTT 3.1.1
// with a clean session and no will (a host sees nothing of the probe),
// subscribes to what the node subscribes to, reads the primary host's
// retained STATE, asks what the broker announces in MQTT 5, and decides.
// It publishes nothing: any message under spBv1.0/ is a host's business.
func ProbeSparkplug(ctx context.Context, s Sparkplug) (*SparkplugResult, error) {
	res := &SparkplugResult{Sink: s.Sink, Broker: s.Endpoint.Broker, Node: s.Group + "/" + s.Node}
	o := &res.Observed
	state := make(chan []byte, 1)
	c, err := connectPaho(s.Endpoint, s.Endpoint.ClientID+"-probe", func(_ mqtt.Client, m mqtt.Message) {
		select {
		case state <- append([]byte(nil), m.Payload()...):
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	defer c.Disconnect(100)
	topics := []string{"spBv1.0/" + s.Group + "/NCMD/" + s.Node}
	if s.PrimaryHost != "" {
		topics = append(topics, "spBv1.0/STATE/"+s.PrimaryHost)
	}
	granted, err := subscribeAll(c, topics, 1)
	if err != nil {
		return nil, err
	}
	o.Granted = map[string]int{}
	for i, t := range topics {
		o.Granted[t] = granted[i]
	}
	if s.PrimaryHost != "" {
		o.HostState = "none"
		t := time.NewTimer(hostStateWait)
		select {
		case p := <-state:
			var st struct {
				Online bool `json:"online"`
			}
			o.HostState = "offline"
			if json.Unmarshal(p, &st) == nil && st.Online {
				o.HostState = "online"
			}
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	a, err := walsink.ProbeAnnounced(ctx, s.Endpoint.Broker, s.Endpoint.TLS, s.Endpoint.ClientID+"-probe", s.Endpoint.Username, s.Endpoint.Password)
	switch {
	case errors.Is(err, walsink.ErrNoMQTT5):
	case err != nil:
		return nil, fmt.Errorf("MQTT 5 CONNECT: %w", err)
	default:
		o.Announced = &a
	}
	res.Findings = DecideSparkplug(s, *o)
	return res, nil
}

// DecideSparkplug judges what the probe saw of a Sparkplug sink's broker.
// A refused subscription is a Fail: the node ends every session whose
// subscriptions fail, so it is never born.
func DecideSparkplug(s Sparkplug, o SparkplugObservations) []Finding {
	var fs []Finding
	for _, t := range slices.Sorted(maps.Keys(o.Granted)) {
		switch g := o.Granted[t]; {
		case g == 0x80:
			fs = append(fs, Finding{Fail, fmt.Sprintf("the broker refuses the node's subscription to %s: the node ends every session and is never born; allow it (subscribe) for client id %q", t, s.Endpoint.ClientID)})
		case g < 1:
			fs = append(fs, Finding{Warn, fmt.Sprintf("the broker grants QoS %d on %s (the node asks 1): a command or STATE can be lost", g, t)})
		}
	}
	switch o.HostState {
	case "online":
		fs = append(fs, Finding{OK, fmt.Sprintf("primary host %s is online: the node will be born once connected", s.PrimaryHost)})
	case "offline", "none":
		fs = append(fs, Finding{Warn, fmt.Sprintf("primary host %s is not online (retained STATE: %s): the births, and every result, wait for it (results are held on disk as historical)", s.PrimaryHost, o.HostState)})
	}
	a := o.Announced
	switch {
	case a == nil:
		fs = append(fs, Finding{OK, "the broker speaks MQTT 3.1.1 only and announces no limits: the sink falls back to 3.1.1 (set protocol_version = 4 to skip the MQTT 5 attempt)"})
	default:
		if a.MaximumQoS < 1 {
			fs = append(fs, Finding{Warn, fmt.Sprintf("the broker announces Maximum QoS %d: the NDEATH will (QoS 1) and the subscriptions are downgraded, and a host may miss a death", a.MaximumQoS)})
		}
		if a.MaximumPacketSize > 0 {
			fs = append(fs, Finding{OK, fmt.Sprintf("the broker announces Maximum Packet Size %d bytes: an NBIRTH or DBIRTH larger than that (many devices or metrics) is refused", a.MaximumPacketSize)})
		}
	}
	return fs
}
