package config

import (
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty/function"
)

// Loader decodes configurations with injectable lookups, so tests are
// deterministic. The zero Loader uses the process environment and the
// machine's identity.
type Loader struct {
	// Env looks up environment variables for env(); nil means os.LookupEnv.
	Env func(string) (string, bool)
	// DeviceID returns the default device id when the agent block sets none;
	// nil means MachineDeviceID.
	DeviceID func() (string, error)

	// accepted, when set, is told the schema every block is decoded
	// against (tests check the configuration reference and
	// examples/full.hcl with it).
	accepted func(block *hcl.Block, attrNames []string, blocks []hcl.BlockHeaderSchema)
}

// Load reads, parses, decodes and validates the file at path with the
// process environment and the machine's identity. On any error the Config is
// nil and the diagnostics hold every problem found, each with a position.
// Warnings may come with a non-nil Config.
func Load(path string) (*Config, hcl.Diagnostics) {
	return Loader{}.Load(path)
}

// Parse decodes and validates src as if read from filename (which names
// positions and anchors file() paths), looking up env() variables with env
// (nil means os.LookupEnv). It returns as Load does.
func Parse(src []byte, filename string, env func(string) (string, bool)) (*Config, hcl.Diagnostics) {
	return Loader{Env: env}.Parse(src, filename)
}

// Load is the package Load with l's lookups.
func (l Loader) Load(path string) (*Config, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read configuration",
			Detail:   err.Error(),
			Subject:  &hcl.Range{Filename: path, Start: hcl.InitialPos, End: hcl.InitialPos},
		}}
	}
	return l.Parse(src, path)
}

var rootSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "agent"},
	{Type: "broker"},
	{Type: "source", LabelNames: []string{"type", "name"}},
	{Type: "sink", LabelNames: []string{"type", "name"}},
	{Type: "pipeline", LabelNames: []string{"name"}},
	{Type: "state"},
	{Type: "checkpoint"},
	{Type: "upload", LabelNames: []string{"type"}},
	{Type: "ingest"},
	{Type: "restart"},
}}

// Parse is the package Parse with l's lookups.
func (l Loader) Parse(src []byte, filename string) (*Config, hcl.Diagnostics) {
	env, deviceID := l.Env, l.DeviceID
	if env == nil {
		env = os.LookupEnv
	}
	if deviceID == nil {
		deviceID = MachineDeviceID
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	d := &decoder{diags: diags, accepted: l.accepted, funcs: map[string]function.Function{
		"env":  envFunc(env),
		"file": fileFunc(filepath.Dir(filename)),
	}}
	content, diags := file.Body.Content(rootSchema)
	d.extend(diags)

	cfg := &Config{Filename: filename, fingerprint: fingerprint(src)}
	blocks := content.Blocks.ByType()
	cfg.Agent = d.decodeAgent(d.single(content.Blocks, "agent"), deviceID)
	if b := d.single(content.Blocks, "broker"); b != nil {
		cfg.Broker = d.decodeBroker(b)
	}
	cfg.Sources = d.decodeSources(blocks["source"], cfg.Broker)
	cfg.Sinks = d.decodeSinks(blocks["sink"], cfg.Broker)
	d.checkSparkplugNodes(cfg.Sinks, cfg.Agent.DeviceID)
	cfg.State = d.decodeState(d.single(content.Blocks, "state"))
	cfg.Checkpoint = d.decodeCheckpoint(d.single(content.Blocks, "checkpoint"))
	if b := d.single(content.Blocks, "upload"); b != nil {
		cfg.Upload = d.decodeUpload(b)
	}
	cfg.Ingest = d.decodeIngest(d.single(content.Blocks, "ingest"))
	d.checkMessageSizes(cfg)
	cfg.Restart = d.decodeRestart(d.single(content.Blocks, "restart"))
	cfg.Pipelines = d.decodePipelines(blocks["pipeline"], cfg.Sources, cfg.Sinks, cfg.Agent)
	d.warnUnused(cfg)
	d.checkDiskBudget(cfg)
	if d.diags.HasErrors() {
		return nil, d.diags
	}
	return cfg, d.diags
}

// warnUnused warns about MQTT and file sources and sinks no pipeline uses:
// declared but idle, they are likely a mistake. A simulator is useful alone.
func (d *decoder) warnUnused(cfg *Config) {
	used := map[any]bool{}
	for _, p := range cfg.Pipelines {
		used[p.From.Source] = true
		if p.Control != nil {
			used[p.Control.Source] = true
		}
		for _, r := range p.To {
			used[r.Sink] = true
		}
		for _, r := range []*SinkRef{p.LateOutput, p.DeadLetter} {
			if r != nil {
				used[r.Sink] = true
			}
		}
	}
	for _, s := range cfg.Sources {
		if !used[s] && s.Type != SourceSimulator {
			d.warnf(s.DeclRange, "Unused source", "No pipeline reads from source.%s.%s.", s.Type, s.Name)
		}
	}
	for _, s := range cfg.Sinks {
		if !used[s] {
			d.warnf(s.DeclRange, "Unused sink", "No pipeline writes to sink.%s.%s.", s.Type, s.Name)
		}
	}
}
