package checkpoint

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// ManifestVersion is the manifest format version this package writes, and
// the only one it reads: until the first tagged release a change raises it
// and drops the reading of the previous one. The control state in Extra
// ("control/<pipeline>") is canonical JSON with U+2028 and U+2029 escaped,
// as every JSON text Eddy writes (package jsontext).
const ManifestVersion = 2

// writtenBy says which build wrote a file of format version v when this
// build writes current, for the error that refuses it.
func writtenBy(v, current int) string {
	if v > current {
		return "a newer Eddy"
	}
	return "a development build before the first release"
}

// FileRef names one snapshot file of a checkpoint and what it holds.
type FileRef struct {
	// Name is the file's path relative to the store root, "files/<sha256>.snap".
	Name string `json:"name"`
	// Size in bytes and SHA-256 (lower-case hex) of the whole file.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Kind is KindFull or KindIncremental.
	Kind Kind `json:"kind"`
	// Checkpoint is the id of the checkpoint that wrote the file; in a chain
	// it may be older than the manifest's.
	Checkpoint uint64 `json:"checkpoint"`
	// Task that wrote the file and the Pipeline whose state it holds. Restore
	// maps state by pipeline name, so a renumbered or re-parallelized task
	// still finds its pipeline's files.
	Task     string `json:"task"`
	Pipeline string `json:"pipeline,omitempty"`
}

// Manifest describes one completed checkpoint. Its existence, durable, is
// what makes the checkpoint complete: files without a manifest belong to a
// checkpoint that never completed and are ignored.
type Manifest struct {
	FormatVersion int       `json:"format_version"`
	ID            uint64    `json:"id"`
	Time          time.Time `json:"time"` // wall clock at completion, set by the agent
	Kind          Kind      `json:"kind"`
	// Files is the ordered chain to apply: for each task its last full file,
	// then its increments in checkpoint order. The files of one task keep
	// that order; files of different tasks hold disjoint state.
	Files []FileRef `json:"files"`
	// SourcePositions maps a source name to its ingest-log offset at the
	// barrier: restore replays the log from there.
	SourcePositions   map[string]uint64 `json:"source_positions,omitempty"`
	ConfigFingerprint string            `json:"config_fingerprint,omitempty"`
	// DurationMs is from trigger to the last acknowledgement; AlignmentMs the
	// longest barrier alignment of any task.
	DurationMs  int64 `json:"duration_ms"`
	AlignmentMs int64 `json:"alignment_ms"`
	// Extra is opaque data that tasks attach (pending sink output, watermarks,
	// timers); keys are unique across tasks.
	Extra map[string][]byte `json:"extra,omitempty"`
}

// Size returns the bytes written by this checkpoint: its own files.
func (m *Manifest) Size() int64 {
	var n int64
	for _, f := range m.Files {
		if f.Checkpoint == m.ID {
			n += f.Size
		}
	}
	return n
}

// FullSize returns the bytes of the whole chain: what a restore reads.
func (m *Manifest) FullSize() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// Pipelines returns the sorted names of the pipelines with state files.
func (m *Manifest) Pipelines() []string {
	var names []string
	for _, f := range m.Files {
		if f.Pipeline != "" && !slices.Contains(names, f.Pipeline) {
			names = append(names, f.Pipeline)
		}
	}
	slices.Sort(names)
	return names
}

// PipelineFiles returns the chain of the named pipeline's files in apply
// order. The slice is new; the caller may keep it.
func (m *Manifest) PipelineFiles(pipeline string) []FileRef {
	var fs []FileRef
	for _, f := range m.Files {
		if f.Pipeline == pipeline {
			fs = append(fs, f)
		}
	}
	return fs
}

// manifestName returns the store path of manifest id: 20 digits, so that
// names sort as ids do.
func manifestName(id uint64) string { return fmt.Sprintf("manifests/%020d.json", id) }

// parseManifestName returns the id of a manifest's base name, or false.
func parseManifestName(base string) (uint64, bool) {
	digits, ok := strings.CutSuffix(base, ".json")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	var id uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		id = id*10 + uint64(c-'0')
	}
	return id, true
}

// fileName returns the content address of a snapshot file.
func fileName(sum []byte) string { return "files/" + hex.EncodeToString(sum) + ".snap" }

// MarshalManifest encodes m as indented JSON after validating it.
func MarshalManifest(m *Manifest) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: encode manifest %d: %w", m.ID, err)
	}
	return append(b, '\n'), nil
}

// UnmarshalManifest decodes and validates a manifest. Bad JSON or an invalid
// manifest gives an error matching ErrCorrupt.
func UnmarshalManifest(b []byte) (*Manifest, error) {
	m := new(Manifest)
	if err := json.Unmarshal(b, m); err != nil {
		return nil, corruptf("checkpoint: decode manifest: %w", err)
	}
	if err := m.Validate(); err != nil {
		return nil, markCorrupt(err)
	}
	return m, nil
}

// Validate checks the invariants every manifest holds: format version
// ManifestVersion, a valid kind, a time, and files named by their content address,
// with a valid kind, a task, and no checkpoint newer than the manifest.
func (m *Manifest) Validate() error {
	if m.FormatVersion != ManifestVersion {
		return fmt.Errorf("checkpoint: manifest %d: format version %d, this build reads version %d only (written by %s)",
			m.ID, m.FormatVersion, ManifestVersion, writtenBy(m.FormatVersion, ManifestVersion))
	}
	if !m.Kind.valid() {
		return fmt.Errorf("checkpoint: manifest %d: invalid kind %v", m.ID, m.Kind)
	}
	if m.Time.IsZero() {
		return fmt.Errorf("checkpoint: manifest %d: no time", m.ID)
	}
	for i, f := range m.Files {
		sum, err := hex.DecodeString(f.SHA256)
		switch {
		case err != nil || len(sum) != 32:
			return fmt.Errorf("checkpoint: manifest %d: file %d: bad sha256 %q", m.ID, i, f.SHA256)
		case f.Name != fileName(sum) || path.Clean(f.Name) != f.Name:
			return fmt.Errorf("checkpoint: manifest %d: file %d: name %q is not its content address", m.ID, i, f.Name)
		case f.Kind != KindFull && f.Kind != KindIncremental:
			return fmt.Errorf("checkpoint: manifest %d: file %s: invalid kind %v", m.ID, f.Name, f.Kind)
		case f.Size < headerSize+trailerSize:
			return fmt.Errorf("checkpoint: manifest %d: file %s: size %d is below the minimum", m.ID, f.Name, f.Size)
		case f.Checkpoint > m.ID || f.Checkpoint == 0:
			return fmt.Errorf("checkpoint: manifest %d: file %s: checkpoint %d", m.ID, f.Name, f.Checkpoint)
		case f.Task == "":
			return fmt.Errorf("checkpoint: manifest %d: file %s: no task", m.ID, f.Name)
		case m.Kind != KindIncremental && (f.Kind != KindFull || f.Checkpoint != m.ID):
			// A full checkpoint or savepoint is self-contained.
			return fmt.Errorf("checkpoint: manifest %d: %v checkpoint references %v file %s of checkpoint %d", m.ID, m.Kind, f.Kind, f.Name, f.Checkpoint)
		}
	}
	return nil
}
