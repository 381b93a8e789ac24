package agent

import (
	"crypto/tls"
	"fmt"

	"github.com/eddy-edge/eddy/agent/identity"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/io/broker"
)

func (df *dataflow) embeddedBroker() (*broker.Broker, error) {
	if df.broker != nil {
		return df.broker, nil
	}
	bc := df.cfg.Broker
	tc, err := brokerTLSConfig(bc.TLS)
	if err != nil {
		return nil, fmt.Errorf("agent: broker: %w", err)
	}
	b, err := broker.Start(brokerOptions(bc, tc, df.vars()), df.log)
	if err != nil {
		return nil, err
	}
	df.metrics.NewGauge("eddy_broker_too_large_total", func() float64 { return float64(b.TooLarge()) })
	df.metrics.NewGauge("eddy_broker_rejected_total", func() float64 { return float64(b.Rejected()) })
	df.metrics.NewGauge("eddy_broker_contained_panics_total", func() float64 { return float64(b.Panics()) })
	df.metrics.NewGauge("eddy_broker_throttled_total", func() float64 { return float64(b.Throttled()) })
	for _, r := range broker.Refusals {
		df.metrics.NewGauge(fmt.Sprintf(`eddy_broker_refused_total{reason=%q}`, r), func() float64 { return float64(b.Refused(r)) })
	}
	df.broker = b
	return b, nil
}

// sinkEndpoint is where the MQTT sink m connects, with its TLS config: its
// broker URL with its own credentials and tls block, or for the embedded
// broker the broker's internal listener (broker.Broker.Internal), whatever
// TLS or credentials the broker's own listener asks of sensors; the sink's
// username, password and tls then do not apply.
func (df *dataflow) sinkEndpoint(m *config.MQTTSink) (broker.Endpoint, *tls.Config, error) {
	return df.clientEndpoint(m.Broker, m.Username, m.Password, m.TLS)
}

// clientEndpoint is sinkEndpoint for any client of the agent's that
// publishes: a broker URL (or config.Embedded) with its credentials and
// tls block.
func (df *dataflow) clientEndpoint(url, username, password string, t *config.TLS) (broker.Endpoint, *tls.Config, error) {
	if url == config.Embedded {
		b, err := df.embeddedBroker()
		if err != nil {
			return broker.Endpoint{}, nil, err
		}
		return b.Internal(), nil, nil
	}
	tc, err := identity.ClientTLS(t)
	return broker.Endpoint{URL: url, Username: username, Password: password}, tc, err
}

// brokerOptions are the options of the embedded broker of bc.
func brokerOptions(bc *config.Broker, tc *tls.Config, vars map[string]string) broker.Options {
	// Closed until run: the embedded sources subscribe while the agent is
	// built, and a publish before that would be acked and lost.
	return broker.Options{Listen: bc.Listen, Username: bc.Username, Password: bc.Password,
		TLS: tc, MaxInflight: bc.MaxInflight, MaxMessageSize: int(bc.MaxMessageSize), MaxClients: bc.MaxClients,
		MaxMessagesPerSecond: bc.MaxMessagesPerSecond, MaxMessagesBurst: bc.MaxMessagesBurst,
		ACLs: brokerACLs(bc, vars), Closed: true}
}

// brokerACLs are the broker's acl blocks, publish and subscribe filters
// alike, with ${device_id} filled in
// (${username} is the broker's to fill per client).
func brokerACLs(bc *config.Broker, vars map[string]string) []broker.ACL {
	var acls []broker.ACL
	for _, c := range bc.ACLs {
		acl := broker.ACL{User: c.User}
		for _, f := range c.Publish {
			acl.Publish = append(acl.Publish, config.Expand(f, vars))
		}
		for _, f := range c.Subscribe {
			acl.Subscribe = append(acl.Subscribe, config.Expand(f, vars))
		}
		acls = append(acls, acl)
	}
	return acls
}

// brokerTLSConfig is the embedded broker's listener config: its own
// certificate and, with a CA, client certificates required and verified
// against that CA (a client without one, or with one from another CA, fails
// the handshake).
func brokerTLSConfig(t *config.TLS) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	return serverTLSConfig(t.Cert, t.Key, t.CA)
}
