package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/eddy-edge/eddy/agent/stages"
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
// one rolls out, and one whose
// definition changed rolls over at a cut (stages.CheckRollover); a change
// that cannot roll over is refused, as is the removal of a pipeline that
// cannot roll out (a start keeps running it from its recorded block; a
// reload keeps the whole configuration as it was) and a change of
// max_key_groups, which every checkpoint depends on. Sinks,
// parallelism and everything else may change.
func reloadCompatible(old, next loadedConfig) error {
	if old.cfg.Agent.MaxKeyGroups != next.cfg.Agent.MaxKeyGroups {
		return errors.New("max_key_groups changed: existing state cannot be regrouped")
	}
	if old.cfg.Agent.DataDir != next.cfg.Agent.DataDir {
		return errors.New("data_dir changed: restart the agent to move it")
	}
	for _, op := range old.cfg.Pipelines {
		if slices.ContainsFunc(next.cfg.Pipelines, func(np *config.Pipeline) bool { return np.Name == op.Name }) {
			continue
		}
		if why := stages.RollOutWhy(old.src, op); why != "" {
			return fmt.Errorf("pipeline %q: removed from the configuration, which cannot roll out: %s; its state stays, as at a start: "+
				"put the pipeline back, or restart with --allow-non-restored-state to drop that state", op.Name, why)
		}
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
		if what, why := stages.RollOverChange(old.src, op, next.src, np); why != "" {
			return fmt.Errorf("pipeline %q: %s, which cannot roll over: %s; rename the pipeline to start it afresh", np.Name, what, why)
		}
	}
	return nil
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
