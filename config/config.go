package config

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Config is one decoded and validated Eddy configuration. Every optional
// value holds its default, so callers never re-apply defaults. Each block
// type carries DeclRange, the position of its header, for later diagnostics;
// a block that was not written (and so holds only defaults) has a zero
// DeclRange.
type Config struct {
	// Filename is the name the source was parsed under.
	Filename string
	Agent    Agent
	// Broker is the embedded broker, or nil when there is no broker block.
	Broker *Broker
	// Sources, Sinks and Pipelines are in declaration order.
	Sources    []*Source
	Sinks      []*Sink
	Pipelines  []*Pipeline
	State      State
	Checkpoint Checkpoint
	// Upload is nil when there is no upload block.
	Upload  *Upload
	Ingest  Ingest
	Restart Restart

	fingerprint string
}

// Fingerprint identifies the configuration for checkpoint manifests: the
// SHA-256, in hex, of the source with line endings made "\n" and trailing
// blanks of each line removed, so a CRLF checkout or stray spaces keep it and
// any other change does not. Values that env() and file() read are not part
// of it.
func (c *Config) Fingerprint() string { return c.fingerprint }

// SourceByName returns the source named name, or nil. Source names are unique
// across source types.
func (c *Config) SourceByName(name string) *Source {
	for _, s := range c.Sources {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// SinkByName returns the sink named name, or nil. Sink names are unique
// across sink types.
func (c *Config) SinkByName(name string) *Sink {
	for _, s := range c.Sinks {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func fingerprint(src []byte) string {
	h := sha256.New()
	for line := range strings.Lines(string(src)) {
		h.Write([]byte(strings.TrimRight(line, " \t\r\n")))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}
