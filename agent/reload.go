package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/eddy-edge/eddy/config"
)

// loadedConfig is a configuration and the bytes it was parsed from, which a
// reload compares expressions by.
type loadedConfig struct {
	cfg *config.Config
	src []byte
}

func loadConfig(path string) (loadedConfig, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return loadedConfig{}, fmt.Errorf("read configuration: %w", err)
	}
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		return loadedConfig{}, errors.New("invalid configuration:\n" + strings.TrimRight(config.FormatDiagnostics(diags), "\n"))
	}
	if diags = checkConfig(cfg); diags.HasErrors() {
		return loadedConfig{}, errors.New("invalid configuration:\n" + strings.TrimRight(config.FormatDiagnostics(diags), "\n"))
	}
	return loadedConfig{cfg: cfg, src: src}, nil
}

// reloadCompatible reports why the state of old cannot carry over to next,
// or nil. Pipelines are matched by name: a new one starts empty, a removed
// one's state is dropped, and one whose state layout would change — its
// window, key, aggregates or source — is refused, as is a change of
// max_key_groups, which every checkpoint depends on. Filters, maps, sinks,
// parallelism and everything else may change.
func reloadCompatible(old, next loadedConfig) error {
	if old.cfg.Agent.MaxKeyGroups != next.cfg.Agent.MaxKeyGroups {
		return errors.New("max_key_groups changed: existing state cannot be regrouped")
	}
	if old.cfg.Agent.DataDir != next.cfg.Agent.DataDir {
		return errors.New("data_dir changed: restart the agent to move it")
	}
	for _, np := range next.cfg.Pipelines {
		var op *config.Pipeline
		for _, p := range old.cfg.Pipelines {
			if p.Name == np.Name {
				op = p
			}
		}
		if op == nil {
			continue
		}
		if what := pipelineShape(old.src, op).differs(pipelineShape(next.src, np)); what != "" {
			return fmt.Errorf("pipeline %q: %s changed, and its state depends on it; rename the pipeline to start it afresh", np.Name, what)
		}
	}
	return nil
}

// stateShape is what a pipeline's keyed state depends on: its window, key,
// aggregates and source. A checkpoint records it per pipeline (manifest
// extra "shape/<pipeline>"), so that a restart with a configuration that
// changed one of them does not read state it would misinterpret.
type stateShape struct {
	Window     string   `json:"window"`
	Key        string   `json:"key"`
	Source     string   `json:"source"`
	Aggregates []string `json:"aggregates"`
	// Keyed is the per-key function calls and the order (keyedShape);
	// omitted when empty, so checkpoints of pipelines without them compare
	// as before.
	Keyed string `json:"keyed,omitempty"`
}

// pipelineShape returns the state shape of p, whose configuration source is
// src.
func pipelineShape(src []byte, p *config.Pipeline) stateShape {
	sh := stateShape{Window: windowShape(p.Window), Key: exprText(src, p.Key), Source: p.From.Source.Name, Keyed: keyedShape(src, p)}
	for _, a := range p.Aggregates {
		sh.Aggregates = append(sh.Aggregates, fmt.Sprintf("%s = %s(%s) q=%v", a.Name, a.Func, exprText(src, a.Arg), a.Q))
	}
	return sh
}

// differs names the first part of sh that differs from o ("the window",
// "the key", "the source", "the aggregates"), or returns "".
func (sh stateShape) differs(o stateShape) string {
	switch {
	case sh.Window != o.Window:
		return "the window"
	case sh.Key != o.Key:
		return "the key"
	case sh.Source != o.Source:
		return "the source"
	case !slices.Equal(sh.Aggregates, o.Aggregates):
		return "the aggregates"
	case sh.Keyed != o.Keyed:
		return "the per-key functions"
	}
	return ""
}

func shapeExtraKey(pipeline string) string { return "shape/" + pipeline }

func windowShape(w *config.Window) string {
	if w == nil {
		return ""
	}
	return fmt.Sprintf("%s %s %v %v %v %v %d %d %v %v %d", w.Kind, w.Time, w.Size, w.Slide, w.Offset, w.Gap,
		w.Count, w.CountSlide, w.AllowedLateness, w.EarlyEvery, w.TriggerCount)
}

// exprText is the source text of e, with blanks trimmed.
func exprText(src []byte, e hcl.Expression) string {
	if e == nil {
		return ""
	}
	r := e.Range()
	if r.Start.Byte < 0 || r.End.Byte > len(src) || r.Start.Byte > r.End.Byte {
		return fmt.Sprintf("%T@%v", e, r)
	}
	return strings.TrimSpace(string(src[r.Start.Byte:r.End.Byte]))
}

// watchReload waits for reload requests (SIGHUP). A configuration that
// loads and keeps state compatible is sent on next and ends the current run
// through stop (which takes a final checkpoint); anything else is refused
// with a log line and the agent keeps running on what it has.
func watchReload(ctx context.Context, path string, cur loadedConfig, reload <-chan struct{}, log *slog.Logger,
	next chan<- loadedConfig, stop func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload:
		}
		nl, err := loadConfig(path)
		if err == nil {
			err = reloadCompatible(cur, nl)
		}
		if err != nil {
			log.Error("configuration reload refused; running on the previous configuration", "path", path, "err", err)
			continue
		}
		log.Info("configuration reload accepted: taking a checkpoint and restarting the pipelines", "path", path)
		next <- nl
		stop()
		return
	}
}
