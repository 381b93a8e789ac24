package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/eddy-edge/eddy/agent/offsite"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/state/vfs"
)

// RestoreFromS3 downloads a checkpoint (the newest that verifies, or the
// id that from ends in) and its files from S3 (s3://bucket/prefix[/ID])
// into the data_dir of the configuration at cfgPath, verifying every
// checksum, so that the next `eddy run` restores it. It reports progress
// to w, or with bar set (standard output is a terminal) as a progress bar
// per file. offsite.RestoreFromS3 holds the rules; without a prefix in
// from, the upload block's prefix for the data_dir's device id is used.
func RestoreFromS3(ctx context.Context, cfgPath, from string, log *slog.Logger, w func(string), bar func(string)) (uint64, error) {
	return restoreFromS3(ctx, vfs.Default, cfgPath, from, log, w, bar)
}

// restoreFromS3 is RestoreFromS3 writing data_dir through fsys.
func restoreFromS3(ctx context.Context, fsys vfs.FS, cfgPath, from string, log *slog.Logger, w func(string), bar func(string)) (uint64, error) {
	cfg, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		return 0, errors.New("invalid configuration:\n" + strings.TrimRight(config.FormatDiagnostics(diags), "\n"))
	}
	loc, err := offsite.ParseS3(from)
	if err != nil {
		return 0, err
	}
	t, err := uploadTarget(cfg, loc.Bucket, loc.Prefix)
	if err != nil {
		return 0, err
	}
	return offsite.RestoreFromS3(ctx, fsys, t, loc, cfg.Agent.DataDir, log, w, bar)
}

// checkpointSummary is one line of `eddy checkpoints ls`.
type checkpointSummary struct {
	ID       uint64 `json:"id"`
	Time     string `json:"time"`
	Kind     string `json:"kind"`
	Bytes    int64  `json:"bytes"`
	Chain    int64  `json:"chain_bytes"`
	Duration int64  `json:"duration_ms"`
	Align    int64  `json:"alignment_ms"`
	Files    int    `json:"files"`
}

func summarize(m *checkpoint.Manifest) checkpointSummary {
	return checkpointSummary{ID: m.ID, Time: m.Time.UTC().Format(time.RFC3339), Kind: m.Kind.String(), Bytes: m.Size(),
		Chain: m.FullSize(), Duration: m.DurationMs, Align: m.AlignmentMs, Files: len(m.Files)}
}

// ListCheckpoints prints the checkpoints of the configuration's data_dir, or
// of its S3 bucket with remote.
func ListCheckpoints(ctx context.Context, cfgPath string, remote bool, log *slog.Logger, w func(string)) error {
	cfg, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		return errors.New("invalid configuration:\n" + strings.TrimRight(config.FormatDiagnostics(diags), "\n"))
	}
	var ms []*checkpoint.Manifest
	if remote {
		t, err := uploadTarget(cfg, "", "")
		if err != nil {
			return err
		}
		if ms, err = offsite.Manifests(ctx, t, log, w); err != nil {
			return err
		}
	} else {
		store, err := checkpoint.OpenStore(vfs.Default, filepath.Join(cfg.Agent.DataDir, "checkpoints"))
		if err != nil {
			return err
		}
		ids, err := store.ManifestIDs()
		if err != nil {
			return err
		}
		for _, id := range ids {
			m, err := store.ReadManifest(id)
			if err != nil {
				w(fmt.Sprintf("%d: unreadable: %v", id, err))
				continue
			}
			ms = append(ms, m)
		}
	}
	w(fmt.Sprintf("%-6s  %-20s  %-11s  %10s  %10s  %8s  %8s  %5s", "ID", "TIME", "KIND", "BYTES", "CHAIN", "DURATION", "ALIGN", "FILES"))
	for _, m := range ms {
		s := summarize(m)
		w(fmt.Sprintf("%-6d  %-20s  %-11s  %10d  %10d  %6dms  %6dms  %5d", s.ID, s.Time, s.Kind, s.Bytes, s.Chain, s.Duration, s.Align, s.Files))
	}
	return nil
}

// ShowCheckpoint prints one local checkpoint's manifest as JSON.
func ShowCheckpoint(cfgPath string, id uint64, w func(string)) error {
	cfg, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		return errors.New("invalid configuration:\n" + strings.TrimRight(config.FormatDiagnostics(diags), "\n"))
	}
	store, err := checkpoint.OpenStore(vfs.Default, filepath.Join(cfg.Agent.DataDir, "checkpoints"))
	if err != nil {
		return err
	}
	m, err := store.ReadManifest(id)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(struct {
		checkpointSummary
		Manifest *checkpoint.Manifest `json:"manifest"`
	}{summarize(m), m}, "", "  ")
	if err != nil {
		return err
	}
	w(string(b))
	return nil
}

// RequestSavepoint asks the agent running with the configuration at cfgPath
// to take a savepoint, through its admin endpoint, and returns its id.
func RequestSavepoint(ctx context.Context, cfgPath string) (uint64, error) {
	cfg, diags := config.Load(cfgPath)
	if diags.HasErrors() {
		return 0, errors.New("invalid configuration:\n" + strings.TrimRight(config.FormatDiagnostics(diags), "\n"))
	}
	if cfg.Agent.Admin == "" {
		return 0, errors.New("the agent has no admin endpoint (agent { admin = \"127.0.0.1:8787\" })")
	}
	client, scheme, err := adminClient(cfg.Agent.AdminTLS)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+"://"+cfg.Agent.Admin+"/api/savepoint", nil)
	if err != nil {
		return 0, err
	}
	if cfg.Agent.AdminToken != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Agent.AdminToken)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("is the agent running? %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		ID    uint64 `json:"id"`
		Error string `json:"error"`
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &body)
	if resp.StatusCode != http.StatusOK {
		msg := body.Error
		if msg == "" {
			msg = strings.TrimSpace(string(raw))
		}
		return 0, fmt.Errorf("%s: %s", resp.Status, msg)
	}
	return body.ID, nil
}
