package agent

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/io/broker"
	"github.com/eddy-edge/eddy/operators/io/sink"
	"github.com/eddy-edge/eddy/operators/io/sparkplug"
	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/state/vfs"
)

// sink returns the runner of s, creating it on first use.
func (df *dataflow) sink(s *config.Sink) (*sinkRunner, error) {
	if r, ok := df.sinks[s.Name]; ok {
		return r, nil
	}
	failures := df.metrics.GetOrCreateCounter(fmt.Sprintf(`eddy_sink_failures_total{sink=%q}`, s.Name))
	r := newSinkRunner(s.Name, df.log, failures.Inc)
	r.fatal = df.fail
	var (
		sk  sink.Sink
		err error
	)
	switch {
	case s.File != nil && s.File.Delivery == config.ExactlyOnce:
		var tf *sink.TwoPhaseFile
		if tf, err = sink.OpenTwoPhaseFile(vfs.Default, dataPath(df.cfg, s.File.Path)); err == nil {
			tf.SetRetention(sink.PartRetention{MaxFiles: s.File.MaxFiles, MaxAge: s.File.MaxAge})
			r.tx = tf
		}
	case s.Stdout != nil:
		sk = sink.NewStdout(df.stdout, s.Stdout.Format == "pretty")
	case s.File != nil:
		sk, err = sink.NewFile(sink.FileOptions{Path: dataPath(df.cfg, s.File.Path), RotateSize: s.File.RotateSizeBytes})
	case s.MQTT != nil:
		m := s.MQTT
		ep, tc, eerr := df.sinkEndpoint(m)
		if eerr != nil {
			return nil, fmt.Errorf("agent: sink %q: %w", s.Name, eerr)
		}
		r.maxPayload = int(m.MaxPayload)
		if m.UsesWAL() {
			var w *walTx
			if w, err = df.openWALSink(s, ep, tc); err == nil {
				r.tx = w
				if m.ProtocolVersion == 5 {
					r.packetLimit = w.overPacketLimit
				}
			}
			break
		}
		qos := byte(m.QoS)
		if qos > 1 {
			qos = 1
		}
		if m.Delivery == config.AtMostOnce {
			qos = 0
		}
		sk, err = sink.NewMQTT(sink.MQTTOptions{Broker: ep.URL, ClientID: config.Expand(m.ClientID, df.vars()),
			Topic: m.Topic, QoS: qos, Retain: m.Retain, Username: ep.Username, Password: ep.Password, TLS: tc,
			DeviceID: df.deviceID}, df.log)
	case s.Sparkplug != nil:
		var sp *sparkplug.Sink
		if sp, err = df.openSparkplugSink(s); err == nil {
			r.tx = sparkplugTx{sp}
		}
	default:
		err = errors.New("unknown sink type")
	}
	if err != nil {
		return nil, fmt.Errorf("agent: sink %q: %w", s.Name, err)
	}
	if r.tx == nil {
		r.plain = sk
	}
	df.sinks[s.Name] = r
	return r, nil
}

// openSparkplugSink opens the Sparkplug edge node of s.
func (df *dataflow) openSparkplugSink(s *config.Sink) (*sparkplug.Sink, error) {
	m := s.Sparkplug
	ep, tc, err := df.clientEndpoint(m.Broker, m.Username, m.Password, m.TLS)
	if err != nil {
		return nil, err
	}
	o := sparkplugOptions(df.cfg, s, ep, df.vars())
	o.TLS, o.Log = tc, df.log.With("sink", s.Name)
	sk, err := sparkplug.NewSink(o)
	if err != nil {
		return nil, err
	}
	cur := df.sparkplugSinks[s.Name]
	if cur == nil {
		cur = new(atomic.Pointer[sparkplug.Sink])
		df.sparkplugSinks[s.Name] = cur
		registerSparkplugMetrics(df.metrics, s.Name, cur)
	}
	cur.Store(sk)
	return sk, nil
}

// registerSparkplugMetrics exposes the Sparkplug sink cur holds on
// /metrics, whichever one a region restart put there.
func registerSparkplugMetrics(set *metrics.Set, name string, cur *atomic.Pointer[sparkplug.Sink]) {
	l := fmt.Sprintf(`{sink=%q}`, name)
	stats := func() sparkplug.SinkStats { return cur.Load().Stats() }
	set.NewGauge("eddy_sparkplug_published_total"+l, func() float64 { return float64(stats().Published) })
	set.NewGauge("eddy_sparkplug_historical_total"+l, func() float64 { return float64(stats().Historical) })
	set.NewGauge("eddy_sparkplug_held"+l, func() float64 { return float64(stats().Held) })
	set.NewGauge("eddy_sparkplug_held_bytes"+l, func() float64 { return float64(stats().HeldBytes) })
	set.NewGauge("eddy_sparkplug_dropped_total"+l, func() float64 { return float64(stats().Dropped) })
	set.NewGauge("eddy_sparkplug_refused_total"+l, func() float64 { return float64(stats().Refused) })
	set.NewGauge("eddy_sparkplug_bdseq"+l, func() float64 { return float64(stats().BdSeq) })
	set.NewGauge("eddy_sparkplug_protocol_version"+l, func() float64 { return float64(stats().Protocol) })
	set.NewGauge("eddy_sparkplug_born"+l, func() float64 {
		if stats().Born {
			return 1
		}
		return 0
	})
}

// sparkplugOptions are the options of cfg's Sparkplug sink s connecting
// to ep: its ids with ${device_id} filled in, the datatypes of the
// aggregates of the pipeline feeding it (a count is an integer, the rest
// are numbers), and its bdSeq kept in data_dir/sparkplug/NAME.bdseq, so a
// restart never reuses one.
func sparkplugOptions(cfg *config.Config, s *config.Sink, ep broker.Endpoint, vars map[string]string) sparkplug.SinkOptions {
	m := s.Sparkplug
	types := map[string]sparkplug.DataType{}
	for _, p := range cfg.Pipelines {
		if !slices.ContainsFunc(p.To, func(r config.SinkRef) bool { return r.Sink == s }) {
			continue
		}
		for _, a := range p.Aggregates {
			field := sparkplug.FieldNumber
			if a.Func == "count" {
				field = sparkplug.FieldInteger
			}
			types[a.Name] = sparkplug.DataTypeOf(field)
		}
	}
	return sparkplug.SinkOptions{
		Broker: ep.URL, ClientID: config.Expand(m.ClientID, vars), Username: ep.Username, Password: ep.Password,
		Node:            sparkplug.Config{Group: m.GroupID, Node: config.Expand(m.EdgeNodeID, vars), PrimaryHost: m.PrimaryHostID, Types: types, MaxDevices: m.MaxDevices},
		BdSeqPath:       filepath.Join(cfg.Agent.DataDir, "sparkplug", s.Name+".bdseq"),
		StoreDir:        filepath.Join(cfg.Agent.DataDir, "sparkplug", s.Name+".wal"),
		MaxStoreBytes:   m.Buffer.MaxDiskBytes,
		AwaitRecover:    true,
		ProtocolVersion: m.ProtocolVersion,
	}
}

// sparkplugTx is the Sparkplug sink as a transactional sink: the results
// it holds while the node is not born are in its log, synced at each
// checkpoint's barrier (PreCommit) and discarded past the restored
// checkpoint (Recover); the rest it publishes as they come.
type sparkplugTx struct{ *sparkplug.Sink }

func (t sparkplugTx) Write(epoch uint64, items []record.Item) error {
	return t.WriteEpoch(epoch, items)
}

// dataPath resolves a path from the configuration: relative paths are
// under data_dir, so a service started from / writes where its state is.
func dataPath(cfg *config.Config, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(cfg.Agent.DataDir, p)
}

// fileSinkPaths are the outputs of cfg's file sinks (dataPath), whose
// bytes count towards the disk budget.
func fileSinkPaths(cfg *config.Config) []string {
	var out []string
	for _, s := range cfg.Sinks {
		if s.File != nil {
			out = append(out, dataPath(cfg, s.File.Path))
		}
	}
	return out
}
