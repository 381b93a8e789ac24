package probe

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eddy-edge/eddy/agent/identity"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/io/sink"
	"github.com/eddy-edge/eddy/operators/record"
)

// Plan is what a configuration gives the probe: its MQTT and Sparkplug
// sinks and MQTT sources on external brokers, with the endpoints the agent would use.
type Plan struct {
	DeviceID   string
	Upstreams  []Upstream
	Sparkplugs []Sparkplug
	Sources    []Source
	// Skipped names blocks the probe leaves alone, with why.
	Skipped []string
}

// Load reads the configuration at path (as `eddy run` would, with the
// device id it would run under) and returns the probe plan.
func Load(path string) (*Plan, error) {
	id, err := identity.DeviceID(path)
	if err != nil {
		return nil, err
	}
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		return nil, errors.New("invalid configuration:\n" + strings.TrimRight(config.FormatDiagnostics(diags), "\n"))
	}
	vars := map[string]string{"device_id": id}
	p := &Plan{DeviceID: id}
	// endpoint is the endpoint of block what on broker; ok is false when
	// the probe leaves it alone (noted in Skipped).
	endpoint := func(what, broker, clientID, user, password string, t *config.TLS) (_ Endpoint, ok bool, _ error) {
		if why := unprobeable(broker); why != "" {
			p.Skipped = append(p.Skipped, what+": "+why)
			return Endpoint{}, false, nil
		}
		tc, err := identity.ClientTLS(t)
		if err != nil {
			return Endpoint{}, false, fmt.Errorf("%s: %w", what, err)
		}
		return Endpoint{Broker: broker, ClientID: config.Expand(clientID, vars), Username: user, Password: password, TLS: tc}, true, nil
	}
	for _, s := range cfg.Sinks {
		m := s.MQTT
		if m == nil {
			continue
		}
		ep, ok, err := endpoint(fmt.Sprintf("sink %q", s.Name), m.Broker, m.ClientID, m.Username, m.Password, m.TLS)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		qos := m.QoS
		if !m.UsesWAL() {
			qos = min(qos, 1) // paho publishes such a sink at QoS 1 at most
		}
		topic, err := sampleTopic(cfg, s, id)
		if err != nil {
			return nil, fmt.Errorf("sink %q: %w", s.Name, err)
		}
		p.Upstreams = append(p.Upstreams, Upstream{
			Sink: s.Name, DeviceID: id, Topic: topic,
			Endpoint: ep,
			Config:   UpstreamConfig{QoS: qos, MaxInflight: m.MaxInflight, MaxPayload: m.MaxPayload},
		})
	}
	for _, s := range cfg.Sinks {
		m := s.Sparkplug
		if m == nil {
			continue
		}
		ep, ok, err := endpoint(fmt.Sprintf("sink %q", s.Name), m.Broker, m.ClientID, m.Username, m.Password, m.TLS)
		if err != nil {
			return nil, err
		}
		if ok {
			p.Sparkplugs = append(p.Sparkplugs, Sparkplug{Sink: s.Name, Group: m.GroupID, Node: config.Expand(m.EdgeNodeID, vars), PrimaryHost: m.PrimaryHostID, Endpoint: ep})
		}
	}
	for _, s := range cfg.Sources {
		m := s.MQTT
		if m == nil {
			continue
		}
		ep, ok, err := endpoint(fmt.Sprintf("source %q", s.Name), m.Broker, m.ClientID, m.Username, m.Password, m.TLS)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		filters := make([]string, len(m.Topics))
		for i, t := range m.Topics {
			filters[i] = config.Expand(t, vars)
		}
		p.Sources = append(p.Sources, Source{
			Source: s.Name, Filters: filters, QoS: m.QoS, Connections: max(m.Connections, 1), Group: SharedGroup(ep.ClientID),
			Endpoint: ep,
		})
	}
	return p, nil
}

// unprobeable says why the probe does not probe a block on broker, or "".
func unprobeable(broker string) string {
	if broker == config.Embedded {
		return "the embedded broker: the agent's own, nothing to commission"
	}
	scheme, _, _ := strings.Cut(broker, "://")
	switch scheme {
	case "tcp", "mqtt", "ssl", "tls", "mqtts":
		return ""
	}
	return "a " + scheme + ":// broker: the probe speaks tcp:// and ssl:// only"
}

// sampleTopic renders sink s's topic as one of its results would be
// published: the first pipeline writing to it (else "eddy-probe"), key
// "eddy-probe", the current minute as the window.
func sampleTopic(cfg *config.Config, s *config.Sink, deviceID string) (string, error) {
	tmpl, err := sink.ParseTemplate(s.MQTT.Topic, nil)
	if err != nil {
		return "", err
	}
	pipeline := "eddy-probe"
find:
	for _, p := range cfg.Pipelines {
		for _, to := range p.To {
			if to.Sink == s {
				pipeline = p.Name
				break find
			}
		}
	}
	start := time.Now().Truncate(time.Minute).UnixMilli()
	r := &record.Result{Pipeline: pipeline, Key: []byte("eddy-probe"), Start: start, End: start + 60_000}
	return string(tmpl.Append(nil, deviceID, r)), nil
}
