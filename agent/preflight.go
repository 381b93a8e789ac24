package agent

import (
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/eddy-edge/eddy/agent/identity"
	"github.com/eddy-edge/eddy/agent/offsite"
	"github.com/eddy-edge/eddy/agent/stages"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/io/broker"
	"github.com/eddy-edge/eddy/operators/io/source"
	"github.com/eddy-edge/eddy/state/vfs"
)

// checkConfig makes every check that run makes on a loaded configuration
// before it touches the network or data_dir: it compiles every pipeline and
// runs preflight. Validate and run both call it, so a configuration that
// validate accepts is not refused at start.
func checkConfig(cfg *config.Config) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, p := range cfg.Pipelines {
		_, d := stages.Compile(cfg, p)
		diags = append(diags, d...)
	}
	return append(diags, preflight(cfg)...)
}

// preflight reports what the components would refuse at start, as
// diagnostics on the blocks that configure them. It builds each component's
// options with the function run builds them with and asks the component's
// own check (the one its constructor or Run makes), so a rule lives in one
// place and validate cannot miss one that run enforces. It reads the files
// the configuration names (TLS certificates, CA bundles) but neither
// connects nor touches data_dir. A component whose options a constructor
// checks belongs here.
func preflight(cfg *config.Config) hcl.Diagnostics {
	var diags hcl.Diagnostics
	report := func(r hcl.Range, summary string, err error, hint string) {
		if err == nil {
			return
		}
		if r.Filename == "" { // a block left at its defaults
			r = hcl.Range{Filename: cfg.Filename, Start: hcl.InitialPos, End: hcl.InitialPos}
		}
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary,
			Detail: strings.TrimSuffix(err.Error(), ".") + ". " + hint, Subject: r.Ptr()})
	}
	// tlsFiles reports the TLS block at r when err, what loading its files
	// returned, is not nil.
	tlsFiles := func(r hcl.Range, err error) bool {
		report(r, "Unusable TLS files", err, "Point cert, key and the CA at readable PEM files.")
		return err == nil
	}
	clientTLS := func(t *config.TLS) bool {
		if t == nil {
			return true
		}
		_, err := identity.ClientTLS(t)
		return tlsFiles(t.DeclRange, err)
	}
	vars := map[string]string{"device_id": cfg.Agent.DeviceID}
	// What an embedded broker's clients dial; the port is known once it
	// listens, the scheme now.
	url := func(broker string) string {
		if broker == config.Embedded && cfg.Broker != nil {
			return "tcp://" + cfg.Broker.Listen
		}
		return broker
	}

	if t := cfg.Agent.AdminTLS; t != nil {
		_, err := adminTLSConfig(t)
		tlsFiles(t.DeclRange, err)
	}
	if bc := cfg.Broker; bc != nil {
		tc, err := brokerTLSConfig(bc.TLS) // nil, nil without a tls block
		if bc.TLS == nil || tlsFiles(bc.TLS.DeclRange, err) {
			report(bc.DeclRange, "Invalid broker", brokerOptions(bc, tc, map[string]string{"device_id": cfg.Agent.DeviceID}).Check(),
				"Beyond loopback the broker needs username and password, or a tls block with a ca (client certificates); a password needs a username.")
		}
	}
	for _, s := range cfg.Sources {
		switch {
		case s.MQTT != nil && s.MQTT.Broker != config.Embedded:
			if !clientTLS(s.MQTT.TLS) {
				continue
			}
			o, err := mqttSourceOptions(s.MQTT, vars)
			if err == nil {
				_, check := newMQTTSource(s.MQTT, o, nil)
				err = check()
			}
			report(s.DeclRange, "Invalid MQTT source", err,
				"Set a fixed, non-empty client_id; with connections > 1 (shared subscriptions) no topic may start with \"$\".")
		case s.Simulator != nil:
			o := simulatorOptions(s.Name, cfg.Agent.DeviceID, broker.Endpoint{URL: url(s.Simulator.Broker)}, s.Simulator)
			report(s.DeclRange, "Invalid simulator", source.NewSimulator(o, nil).Check(),
				"out_of_order, late and malformed are fractions of the readings and add up to at most 1.")
		}
	}
	for _, s := range cfg.Sinks {
		if s.Sparkplug != nil {
			clientTLS(s.Sparkplug.TLS)
		}
		m := s.MQTT
		if m == nil {
			continue
		}
		if !clientTLS(m.TLS) || !m.UsesWAL() {
			continue
		}
		o, _, err := walOptions(m, url(m.Broker), vars)
		if err == nil {
			err = o.Check()
		}
		report(s.DeclRange, "Invalid exactly-once MQTT sink", err,
			"delivery = \"exactly_once\" keeps its own QoS 2 session: it needs a tcp:// or ssl:// broker and a fixed, non-empty client_id; ws:// and wss:// serve at_least_once.")
	}
	report(cfg.Ingest.DeclRange, "Invalid ingest log", ingestOptions(cfg.Ingest, nil).Check(),
		"Give max_disk room for at least two segments.")
	report(cfg.Checkpoint.DeclRange, "Invalid checkpointing", checkpointTasksConfig(cfg).Validate(),
		"Checkpoints cover the pipelines: declare at least one pipeline; interval and timeout are at least 1ms.")
	if cfg.Upload != nil {
		// Builds the client only: no request, and the configured device id
		// (validate reads nothing in data_dir).
		_, err := offsite.NewClient(offsite.Target{Upload: cfg.Upload, DeviceID: cfg.Agent.DeviceID, Prefix: config.Expand(cfg.Upload.Prefix, vars)}, vfs.Default, nil, nil)
		report(cfg.Upload.DeclRange, "Invalid upload", err,
			"endpoint is host:port, prefix is relative (no leading \"/\"), ca_file is a readable PEM file and needs secure = true.")
	}
	return diags
}

// checkpointTasksConfig is the coordinator configuration run would use,
// with one task per source that a pipeline reads (the pipelines' subtasks
// and sinks add more, never fewer).
func checkpointTasksConfig(cfg *config.Config) *checkpoint.Config {
	var tasks []string
	seen := map[string]bool{}
	for _, p := range cfg.Pipelines {
		read := []*config.Source{p.From.Source}
		if p.Control != nil {
			read = append(read, p.Control.Source)
		}
		for _, s := range read {
			if !seen[s.Name] {
				seen[s.Name] = true
				tasks = append(tasks, sourceTaskID(s.Name))
			}
		}
	}
	c := coordinatorConfig(cfg, tasks)
	return &c
}
