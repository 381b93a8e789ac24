package agent

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/eddy-edge/eddy/agent/identity"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/io/broker"
	"github.com/eddy-edge/eddy/operators/io/ingest"
	"github.com/eddy-edge/eddy/operators/io/source"
)

// source returns the runner of src, creating it on first use: pipelines that
// read one source share its connection.
func (df *dataflow) source(src *config.Source) (*sourceRunner, error) {
	if r, ok := df.sources[src.Name]; ok {
		return r, nil
	}
	r := newSourceRunner(src.Name, nil)
	switch {
	case src.File != nil:
		r.reopen = func() source.Source { return source.NewFile(source.FileOptions{Path: src.File.Path}) }
		r.src = r.reopen()
		r.replayable = src.File.Path != "-"
	case src.MQTT != nil:
		m := src.MQTT
		topics := make([]string, len(m.Topics))
		for i, t := range m.Topics {
			topics[i] = config.Expand(t, df.vars())
		}
		if m.Broker == config.Embedded {
			b, err := df.embeddedBroker()
			if err != nil {
				return nil, err
			}
			in, err := df.openIngest(src.Name, dedupOptions(m))
			if err != nil {
				return nil, err
			}
			r.ilog, r.intake = in.log, embeddedIntake(b, topics, in)
			break
		}
		mopts, err := mqttSourceOptions(m, df.vars())
		if err != nil {
			return nil, fmt.Errorf("agent: source %q: %w", src.Name, err)
		}
		connected := df.metrics.NewGauge(fmt.Sprintf(`eddy_mqtt_connected{source=%q}`, src.Name), nil)
		reconnects := df.metrics.NewCounter(fmt.Sprintf(`eddy_mqtt_reconnects_total{source=%q}`, src.Name))
		first := true
		mopts.OnConnectionChange = func(up bool) {
			if up {
				connected.Set(1)
				if !first {
					reconnects.Inc()
				}
				first = false
			} else {
				connected.Set(0)
			}
		}
		r.src, _ = newMQTTSource(m, mopts, df.log) // its Run makes the check
		in, err := df.openIngest(src.Name, dedupOptions(m))
		if err != nil {
			return nil, err
		}
		r.ilog, r.intake = in.log, mqttIntake(r.src, in, df.log, src.Name, func(err error) { r.err = err })
	case src.Simulator != nil:
		s := src.Simulator
		ep := broker.Endpoint{URL: s.Broker}
		if s.Broker == config.Embedded {
			b, err := df.embeddedBroker()
			if err != nil {
				return nil, err
			}
			ep = b.Internal() // see broker.Broker.Internal
			in, err := df.openIngest(src.Name, ingest.DedupOptions{})
			if err != nil {
				return nil, err
			}
			r.ilog, r.intake = in.log, embeddedIntake(b, []string{s.SubscribeFilter()}, in)
		} else {
			r.src = source.NewMQTT(source.MQTTOptions{Broker: ep.URL, ClientID: "eddy-" + df.deviceID + "-" + src.Name + "-in",
				Topics: []string{s.SubscribeFilter()}, QoS: 1}, df.log)
			in, err := df.openIngest(src.Name, ingest.DedupOptions{MaxInflight: config.DefaultMaxInflight})
			if err != nil {
				return nil, err
			}
			r.ilog, r.intake = in.log, mqttIntake(r.src, in, df.log, src.Name, func(err error) { r.err = err })
		}
		df.sims = append(df.sims, source.NewSimulator(simulatorOptions(src.Name, df.deviceID, ep, s), df.log))
	default:
		return nil, fmt.Errorf("agent: source %q has no known type", src.Name)
	}
	if r.ilog != nil {
		df.metrics.NewGauge(fmt.Sprintf(`eddy_ingest_lag_records{source=%q}`, src.Name), func() float64 { return float64(r.ingestLag()) })
	}
	df.sources[src.Name] = r
	return r, nil
}

// mqttSourceOptions are the client options of the MQTT source m, without a
// connection callback.
func mqttSourceOptions(m *config.MQTTSource, vars map[string]string) (source.MQTTOptions, error) {
	tc, err := identity.ClientTLS(m.TLS)
	if err != nil {
		return source.MQTTOptions{}, err
	}
	topics := make([]string, len(m.Topics))
	for i, t := range m.Topics {
		topics[i] = config.Expand(t, vars)
	}
	return source.MQTTOptions{
		Broker: m.Broker, ClientID: config.Expand(m.ClientID, vars), Topics: topics, QoS: byte(m.QoS),
		Username: m.Username, Password: m.Password, CleanSession: m.CleanSession, KeepAlive: m.KeepAlive,
		ReconnectMin: m.ReconnectMin, ReconnectMax: m.ReconnectMax, TLS: tc, MaxMessageSize: int(m.MaxMessageSize),
		ProtocolVersion: byte(m.ProtocolVersion), SessionExpiry: m.SessionExpiry, ReceiveMaximum: uint16(m.ReceiveMaximum),
	}, nil
}

// newMQTTSource creates the client of the MQTT source m (shared
// subscriptions over m.Connections connections when there are several)
// without connecting; check reports what its Run would refuse.
func newMQTTSource(m *config.MQTTSource, o source.MQTTOptions, log *slog.Logger) (src source.Source, check func() error) {
	if m.Connections > 1 {
		s := source.NewSharedMQTT(o, source.SharedOptions{Connections: m.Connections}, log)
		return s, s.Check
	}
	return source.NewMQTT(o, log), o.Check
}

// simulatorOptions are the options of the simulator source name, publishing
// to the broker at url.
func simulatorOptions(name, deviceID string, ep broker.Endpoint, s *config.SimulatorSource) source.SimulatorOptions {
	return source.SimulatorOptions{
		Broker: ep.URL, Username: ep.Username, Password: ep.Password, ClientID: "eddy-" + deviceID + "-" + name + "-sim", Topic: s.Topic, Devices: s.Devices,
		Rate: s.Rate, Seed: s.Seed, OutOfOrder: s.OutOfOrder, Late: s.Late, Malformed: s.Malformed,
		MaxReadings: s.MaxReadings, QoS: 1, ProtocolVersion: byte(s.ProtocolVersion),
	}
}

// openIngest opens the ingest log of a source under data_dir/ingest, with
// its redelivery filter rebuilt from the log's tail.
func (df *dataflow) openIngest(name string, dopts ingest.DedupOptions) (*logIntake, error) {
	ic := df.cfg.Ingest
	l, err := ingest.Open(filepath.Join(df.cfg.Agent.DataDir, "ingest", name), ingestOptions(ic, df.log))
	if err != nil {
		return nil, fmt.Errorf("agent: source %q: %w", name, err)
	}
	d := ingest.NewDedup(dopts)
	start := time.Now()
	if err := d.Load(l); err != nil {
		d.Close()
		l.Close()
		return nil, fmt.Errorf("agent: source %q: %w", name, err)
	}
	if st := d.Stats(); st.Indexed > 0 {
		df.log.Info("ingest: redelivery index rebuilt from the log", "source", name, "entries", st.Indexed,
			"from_offset", st.IndexFirst, "log_first_offset", l.FirstOffset(), "took", time.Since(start).Round(time.Millisecond))
	}
	df.logs = append(df.logs, l)
	df.metrics.NewGauge(fmt.Sprintf(`eddy_ingest_log_bytes{source=%q}`, name), func() float64 { return float64(l.SizeBytes()) })
	df.metrics.NewGauge(fmt.Sprintf(`eddy_ingest_log_last_offset{source=%q}`, name), func() float64 { return float64(l.LastOffset()) })
	in := &logIntake{log: l, dedup: d, logger: df.log, name: name, linger: ic.Linger, holds: df.holds}
	in.indexed.Store(int64(d.Len()))
	df.metrics.NewGauge(fmt.Sprintf(`eddy_ingest_dedup_indexed_entries{source=%q}`, name), func() float64 { return float64(in.indexed.Load()) })
	in.redelivered = redeliveries{logger: df.log, source: name,
		dropped:   df.metrics.NewCounter(fmt.Sprintf(`eddy_ingest_redeliveries_dropped_total{source=%q}`, name)),
		unmatched: df.metrics.NewCounter(fmt.Sprintf(`eddy_ingest_redeliveries_unmatched_total{source=%q}`, name))}
	in.commitsMetric = df.metrics.NewCounter(fmt.Sprintf(`eddy_ingest_commits_total{source=%q}`, name))
	return in, nil
}

// ingestOptions are the options of every source's ingest log.
func ingestOptions(ic config.Ingest, log *slog.Logger) ingest.Options {
	seg := config.IngestSegmentBytes(ic.MaxDiskBytes)
	opts := ingest.Options{SyncInterval: ic.SyncInterval, MaxDiskBytes: ic.MaxDiskBytes, SegmentBytes: seg, Logger: log}
	switch ic.Compression {
	case config.IngestCompressionS2:
		opts.Compression = ingest.CompressS2
	case config.IngestCompressionZstd:
		opts.Compression = ingest.CompressZstd
	}
	if ic.Ack == config.AckAfterWrite {
		opts.Ack = ingest.AfterWrite
	}
	return opts
}
