package stages

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
)

// A pipeline whose definition changed (window, key, filter, map,
// aggregates) rolls over at a cut, a window boundary on the pipeline's
// time: its old definition keeps running beside the new one as a second
// instance, restored from the state the checkpoint holds, and takes the
// readings before the cut; the new one starts empty and takes those from
// the cut. On event time the old instance retires once its watermark has
// passed the cut and its allowed lateness; on processing time once its
// processing time has passed the cut: every window it had open has fired.
//
// On processing time the cut lies after the restart (the now passed to
// CheckRollover), and a reading is routed by the processing time the
// ingest log recorded with it, so a replay after a crash routes every
// reading as the first run did.
//
// To run the old definition the checkpoint must hold it: every checkpoint
// records each stateful pipeline's block text ("definition/<pipeline>")
// and the newest event time it routed ("maxtime/<pipeline>"), which the
// cut must lie after. While a rollover lasts the old instance records it
// ("rollover/<pipeline>"), so a restore in the middle resumes both
// instances with the same cut, and the new instance records its cut
// ("since/<pipeline>"), so that no reading before it ever reaches the new
// definition, even after the old one retired.

// Rollover is one pipeline's change being rolled over, as checkpoints
// record it.
type Rollover struct {
	// Pipeline is the pipeline's name, which the results of both
	// definitions carry.
	Pipeline string `json:"pipeline"`
	// Old is the old definition's instance: the name of its state in
	// checkpoints, Pipeline + "--old-" + OldHash.
	Old     string `json:"old"`
	OldHash string `json:"old_hash"`
	// Block is the old definition's pipeline block as it was configured.
	Block string `json:"block"`
	// Cut is the event time (Unix ms), or the processing time when
	// ProcessingTime, from which the new definition takes the readings;
	// the old one takes those before it.
	Cut int64 `json:"cut"`
	// RetireAt is the watermark (processing time when ProcessingTime) at
	// which the old definition's last window is past its allowed lateness.
	RetireAt int64 `json:"retire_at"`
	// ProcessingTime: the windows are on processing time, and so are Cut
	// and RetireAt.
	ProcessingTime bool `json:"processing_time,omitempty"`
	// Changes says what changed, as validate and the log name it.
	Changes string `json:"changes"`
	// From is the cut of the rollover before this one, before which the
	// old definition took no reading either; 0 when there was none.
	From int64 `json:"from,omitempty"`
	// Held: the pipeline reads a bounded file, so its results wait in
	// its state until the input ends, and the old definition retires
	// only with the run.
	Held bool `json:"held,omitempty"`
}

// RolloverVerdict is what restoring a checkpoint does to one pipeline's
// definitions, decided from the manifest alone: eddy run acts on it and
// eddy validate prints it.
type RolloverVerdict struct {
	Pipeline string
	// Roll is the rollover the restore starts or resumes, or the one the
	// checkpoint recorded when Retired; nil when none.
	Roll *Rollover
	// Fresh: the rollover starts with this restore, from a checkpoint of
	// the old definition; the new definition starts empty.
	Fresh bool
	// Retired: the checkpoint's rollover has ended; the old definition's
	// state holds nothing more to emit and is dropped.
	Retired bool
	// Since is the cut of a rollover that ended: the new definition still
	// takes no reading before it. math.MinInt64 when there is none.
	Since int64
	// Removed: the configuration no longer has the pipeline.
	Removed bool
	// Shape is the pipeline's state shape: now, or for a removed one, as
	// recorded; a new pipeline of the same shape is its rename.
	Shape []byte
	// New: the checkpoint holds nothing of the pipeline.
	New bool
	// Kept: the change cannot roll over (Why), and the pipeline keeps
	// running its previous definition, recorded in the checkpoint.
	Kept bool
	Why  string
	// RenamedFrom is the removed pipeline a new one continues (same
	// definition, another name): it takes the readings from that one's
	// cut, Since.
	RenamedFrom string
	// Refusal says why the change cannot roll over; nil when it can (or
	// nothing changed).
	Refusal error
}

// Extra keys of the rollover's records in the manifest.
func definitionExtraKey(pipeline string) string { return "definition/" + pipeline }
func maxTimeExtraKey(pipeline string) string    { return "maxtime/" + pipeline }
func rolloverExtraKey(pipeline string) string   { return "rollover/" + pipeline }
func sinceExtraKey(pipeline string) string      { return "since/" + pipeline }

// OldInstanceSuffix separates a pipeline's name from its old definition's
// hash in the name of the old instance.
const OldInstanceSuffix = "--old-"

// DefinitionHash is the short hash of a pipeline's definition: of its
// state shape, which holds what a result depends on (window, key, source,
// aggregates, filter, map, per-key functions) and nothing cosmetic.
func DefinitionHash(shape []byte) string {
	if shape == nil {
		return ""
	}
	sum := sha256.Sum256(shape)
	return hex.EncodeToString(sum[:4])
}

// CheckRollover decides what restoring checkpoint m does to pipeline
// name's definitions. shape is its state shape now (Plan.StateShape), nil
// when it keeps none or when the configuration no longer has it
// (removed).
//
// bounded says whether a source is a bounded file (whose pipelines hold
// their results in their state until it ends). at is the wall clock
// (Unix ms) at the restore: a rollover on processing time cuts after it.
// The verdict depends on nothing else: the same arguments give the same
// verdict.
func CheckRollover(m *checkpoint.Manifest, name string, shape []byte, removed bool, bounded func(source string) bool, at int64) RolloverVerdict {
	v := RolloverVerdict{Pipeline: name, Since: math.MinInt64, Removed: removed, Shape: shape}
	if b, ok := m.Extra[sinceExtraKey(name)]; ok && len(b) == 8 {
		v.Since = int64(binary.BigEndian.Uint64(b))
	}
	if b, ok := m.Extra[rolloverExtraKey(name)]; ok {
		var r Rollover
		if err := json.Unmarshal(b, &r); err != nil {
			v.Refusal = fmt.Errorf("agent: checkpoint %d: bad rollover record of pipeline %q: %w", m.ID, name, err)
			return v
		}
		v.Since = max(v.Since, r.Cut)
		v.Roll = &r
		if r.ProcessingTime {
			// The old instance records how far its processing time went as
			// its newest time (Pipeline.retireProcessingTime).
			if b, ok := m.Extra[maxTimeExtraKey(r.Old)]; ok && len(b) == 8 && int64(binary.BigEndian.Uint64(b)) >= r.RetireAt {
				v.Retired = true
			}
		} else if wm, ok := restoredWatermark(m, r.Old); ok && wm >= r.RetireAt && (!r.Held || wm == math.MaxInt64) {
			v.Retired = true
		}
		if changes := recordedChanges(m, name, shape); !removed && len(changes) > 0 && !v.Retired {
			v.Why = fmt.Sprintf("%s while its previous change still rolls over (until %s)", changeText(changes), formatCut(r.RetireAt+1))
			v.Refusal = fmt.Errorf("agent: checkpoint %d: pipeline %q changed again (%s) while its previous change still rolls over (its old definition finishes its windows until %s): "+
				"restore it with the configuration that wrote the checkpoint until then, or start with --allow-non-restored-state to drop that state",
				m.ID, name, changeText(changes), formatCut(r.RetireAt+1))
		}
		return v
	}
	rec := m.Extra[shapeExtraKey(name)]
	if removed {
		v.Shape = rec
	}
	v.New = len(rec) == 0 && len(m.PipelineFiles(name)) == 0
	if len(rec) == 0 || (!removed && shape == nil) {
		return v
	}
	var was stateShape
	if json.Unmarshal(rec, &was) != nil {
		return v
	}
	var changes []ShapeChange
	var now *stateShape
	if !removed {
		var n stateShape
		if err := json.Unmarshal(shape, &n); err != nil {
			v.Refusal = fmt.Errorf("agent: pipeline %q: %w", name, err)
			return v
		}
		now = &n
		if changes = was.changes(n); len(changes) == 0 {
			return v
		}
	}
	what := "removed from the configuration"
	if !removed {
		what = changeText(changes)
	}
	refuse := func(why string) RolloverVerdict {
		v.Why = what + ", which cannot roll over: " + why
		v.Refusal = fmt.Errorf("agent: checkpoint %d holds pipeline %q's state, and %s, which cannot roll over: %s; "+
			"restore it with the configuration that wrote it, or start with --allow-non-restored-state to drop that state",
			m.ID, name, what, why)
		return v
	}
	block, ok := m.Extra[definitionExtraKey(name)]
	if !ok {
		return refuse("the checkpoint was written by a build that does not record pipeline definitions, so the old one cannot run (the next checkpoint of this build records it)")
	}
	oldGrid, newGrid, why := grids(was, now)
	if why == "" && oldGrid.processing && bounded(was.Source) {
		why = fileProcessingTime
	}
	if why != "" {
		return refuse(why)
	}
	from := int64(math.MinInt64)
	if wm, ok := restoredWatermark(m, name); ok && !oldGrid.processing {
		from = wm
	}
	if b, ok := m.Extra[maxTimeExtraKey(name)]; ok && len(b) == 8 {
		from = max(from, int64(binary.BigEndian.Uint64(b)))
	}
	if oldGrid.processing && from != math.MinInt64 {
		// Readings the ingest log holds arrived before the restart: the
		// cut after it gives them all to the old definition.
		from = max(from, at)
	}
	if from == math.MinInt64 {
		v.Retired, v.Fresh = true, true // it never took a reading: no window is open
		return v
	}
	cut, ok := commonBoundary(from, oldGrid, newGrid)
	if !ok {
		return refuse("the old and the new windows share no boundary within 100,000 windows")
	}
	oldHash := DefinitionHash(rec)
	var since int64
	if v.Since != math.MinInt64 {
		since = v.Since
	}
	v.Roll = &Rollover{From: since, Pipeline: name, Old: name + OldInstanceSuffix + oldHash, OldHash: oldHash, Block: string(block),
		Cut: cut, RetireAt: cut - 1 + oldGrid.lateness, Changes: what, Held: bounded(was.Source), ProcessingTime: oldGrid.processing}
	v.Fresh = true
	v.Since = max(v.Since, cut)
	return v
}

// recordedChanges lists what differs between the shape checkpoint m
// recorded for name and shape.
func recordedChanges(m *checkpoint.Manifest, name string, shape []byte) []ShapeChange {
	rec := m.Extra[shapeExtraKey(name)]
	var was, now stateShape
	if len(rec) == 0 || shape == nil || json.Unmarshal(rec, &was) != nil || json.Unmarshal(shape, &now) != nil {
		return nil
	}
	return was.changes(now)
}

// changeText is e.g. "aggregates changed (max_temp added)".
func changeText(changes []ShapeChange) string {
	var parts []string
	for _, c := range changes {
		parts = append(parts, c.String())
	}
	return strings.Join(parts, ", ")
}

// Text is what validate prints and run logs of the verdict, e.g.
// "roll over: aggregates changed (max_temp added): its open windows
// finish as before; windows from 2026-12-07T10:42:30Z use the new
// aggregates"; "" for a refusal.
func (v RolloverVerdict) Text() string {
	switch {
	case v.RenamedFrom != "":
		return fmt.Sprintf("start empty (renamed from %q): windows from %s are its", v.RenamedFrom, formatCut(v.Since))
	case v.Kept:
		return "keep running its previous definition: " + v.Why
	case v.Refusal != nil:
		return ""
	case v.Roll == nil && !v.Retired:
		return "restore" // a definition that took over at a cut: it keeps taking no reading before it
	case v.Retired && v.Fresh:
		return "start empty: its old definition took no reading, so it has no window open"
	case v.Retired && v.Removed:
		return "drop its state: removed from the configuration, and every window of its old definition has finished"
	case v.Retired:
		return "restore; its previous definition has finished its windows"
	case !v.Fresh:
		if v.Removed {
			return fmt.Sprintf("roll over (resumed): removed from the configuration: its open windows finish as before, until %s", formatCut(v.Roll.RetireAt+1))
		}
		return fmt.Sprintf("roll over (resumed): %s: its open windows finish as before; windows from %s use the new definition", v.Roll.Changes, formatCut(v.Roll.Cut))
	case v.Removed:
		if v.Roll.ProcessingTime {
			return "roll over: removed from the configuration: its open windows finish as before; it takes no reading from " + processingCut
		}
		return fmt.Sprintf("roll over: removed from the configuration: its open windows finish as before; it takes no reading from %s", formatCut(v.Roll.Cut))
	case v.Roll.ProcessingTime:
		return fmt.Sprintf("roll over: %s: its open windows finish as before; windows from %s use the new %s", v.Roll.Changes, processingCut, changedParts(v.Roll.Changes))
	}
	return fmt.Sprintf("roll over: %s: its open windows finish as before; windows from %s use the new %s", v.Roll.Changes, formatCut(v.Roll.Cut), changedParts(v.Roll.Changes))
}

// fileProcessingTime is why a processing-time pipeline reading a file
// cannot roll over.
const fileProcessingTime = "its windows are on processing time, and a file's readings get a new processing time at each read, so a restart would route them anew"

// processingCut is where a rollover on processing time cuts, as validate
// and run's log word it: validate cannot know when the agent starts, and
// run says the same words, logging the cut itself beside them.
const processingCut = "the first boundary of both the old and the new windows on processing time after the start"

// changedParts names the parts a change text names, e.g. "aggregates",
// "window and key".
func changedParts(changes string) string {
	var parts []string
	for _, p := range []string{"window", "key", "aggregates", "filter", "map"} {
		if strings.HasPrefix(changes, p+" changed") || strings.Contains(changes, ", "+p+" changed") {
			parts = append(parts, p)
		}
	}
	switch len(parts) {
	case 0:
		return "definition"
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// formatCut is an event time as validate and the log print it.
func formatCut(ms int64) string {
	t := time.UnixMilli(ms).UTC()
	if ms%1000 != 0 {
		return t.Format("2006-01-02T15:04:05.000Z")
	}
	return t.Format(time.RFC3339)
}

// grid is the boundaries of a tumbling window: offset + k·size, on event
// time or, when processing, on processing time.
type grid struct {
	size, offset, lateness int64
	processing             bool
}

// tumblingGrid parses the window of a state shape (windowShape) into its
// grid; only tumbling windows roll over: a sliding window open at any cut
// would hold readings of both sides, and a session window has no boundary
// known in advance to cut at.
func tumblingGrid(shape string) (grid, error) {
	f := strings.Fields(shape)
	if len(f) != len(windowFields) {
		return grid{}, errors.New("is not recorded")
	}
	if f[0] != config.Tumbling {
		return grid{}, fmt.Errorf("is %s on %s time, and only tumbling windows roll over", f[0], f[1])
	}
	dur := func(s string) int64 { d, _ := time.ParseDuration(s); return d.Milliseconds() }
	g := grid{size: dur(f[2]), offset: dur(f[4]), lateness: dur(f[8]), processing: f[1] == config.ProcessingTime}
	if g.processing {
		g.lateness = 0 // a processing-time window goes when it fires
	}
	if g.size <= 0 {
		return grid{}, errors.New("has no size")
	}
	return g, nil
}

// next is the first boundary of g after t.
func (g grid) next(t int64) int64 {
	r := (t - g.offset) % g.size
	if r < 0 {
		r += g.size
	}
	return t - r + g.size
}

func (g grid) on(t int64) bool { return (t-g.offset)%g.size == 0 }

// commonBoundary is the first boundary of old, and of now unless nil,
// after t: a cut there splits no window of either.
func commonBoundary(t int64, old grid, now *grid) (int64, bool) {
	b := old.next(t)
	for range 100_000 {
		if now == nil || now.on(b) {
			return b, true
		}
		b += old.size
	}
	return 0, false
}

// Runs reports whether the old definition runs after the restore.
func (v RolloverVerdict) Runs() bool { return v.Refusal == nil && v.Roll != nil && !v.Retired }

// RolloverRole is the part one instance of a pipeline takes in a
// rollover (SetRollover).
type RolloverRole struct {
	Roll *Rollover
	// Old: the instance runs the old definition; otherwise the new one.
	Old bool
	// Fresh: the rollover starts with this restore (RolloverVerdict).
	Fresh bool
	// Since: the new definition takes no reading before this event time
	// (math.MinInt64: every reading).
	Since int64
}

// SetRollover gives the pipeline its part in a rollover, after New and
// before Restore: the event times it takes and what it records in the
// next checkpoints; Restore finds its state (stateIn).
func (p *Pipeline) SetRollover(r RolloverRole) {
	p.role = r
	switch {
	case r.Old:
		p.roll = r.Roll
		from := int64(math.MinInt64)
		if r.Roll.From != 0 {
			from = r.Roll.From
		}
		p.prep.SetRange(from, r.Roll.Cut)
		for _, st := range p.subtasks {
			st.task.Label(r.Roll.Pipeline, r.Roll.OldHash)
		}
		p.block = nil // the definition is the new one's to record
	case r.Since != math.MinInt64:
		p.since = r.Since
		p.prep.SetRange(r.Since, math.MaxInt64)
	}
}

// noRestore is restoreFrom of a new definition that starts empty.
const noRestore = "\x00"

// CompileOld compiles the old definition of rollover r: its recorded
// block, renamed to r.Old, within the configuration cfg whose text is src,
// so that it reads the same sources and writes the same sinks as
// configured now. It fails when the block no longer fits the
// configuration (a source or sink it names is gone).
func CompileOld(cfg *config.Config, src []byte, r *Rollover) (*Plan, error) {
	head, body, ok := strings.Cut(r.Block, "{")
	if !ok || !strings.Contains(head, strconv.Quote(r.Pipeline)) {
		return nil, fmt.Errorf("pipeline %q: the recorded old definition is not a pipeline block", r.Pipeline)
	}
	block := strings.Replace(head, strconv.Quote(r.Pipeline), strconv.Quote(r.Old), 1) + "{" + body
	pl, err := compileIn(cfg, append(append(slices.Clip(src), "\n\n"...), block...), r.Old, r.Pipeline, "old")
	if err != nil {
		return nil, err
	}
	// Readings it rejects are the new definition's to dead-letter: both
	// see every one.
	pl.Config().DeadLetter = nil
	return pl, nil
}

// compileIn compiles pipeline name from text: today's configuration with
// a recorded definition of pipeline of put in (what, "old" or "previous",
// names it in errors). The plan keeps text for Recompile.
func compileIn(cfg *config.Config, text []byte, name, of, what string) (*Plan, error) {
	full, diags := config.Parse(text, cfg.Filename, nil)
	if diags.HasErrors() {
		return nil, fmt.Errorf("pipeline %q: its %s definition no longer fits the configuration: %s", of, what,
			strings.TrimSpace(config.FormatDiagnostics(diags)))
	}
	for _, q := range full.Pipelines {
		if q.Name != name {
			continue
		}
		pl, diags := Compile(full, q)
		if diags.HasErrors() {
			return nil, fmt.Errorf("pipeline %q: its %s definition does not compile: %s", of, what,
				strings.TrimSpace(config.FormatDiagnostics(diags)))
		}
		pl.src = text
		return pl, nil
	}
	return nil, fmt.Errorf("pipeline %q: its %s definition is missing", of, what)
}

// CheckRollover is CheckRollover of checkpoint m for p at now.
func (p *Pipeline) CheckRollover(m *checkpoint.Manifest, bounded func(source string) bool, now int64) RolloverVerdict {
	return CheckRollover(m, p.name, p.shape, false, bounded, now)
}

// CheckRollover is CheckRollover of checkpoint m for the plan's pipeline,
// whose configuration text is src, at now.
func (pl *Plan) CheckRollover(src []byte, m *checkpoint.Manifest, bounded func(source string) bool, now int64) RolloverVerdict {
	return CheckRollover(m, pl.cfg.Name, pl.StateShape(src), false, bounded, now)
}

// BoundedSources is CheckRollover's bounded of cfg: a file source other
// than stdin.
func BoundedSources(cfg *config.Config) func(string) bool {
	return func(name string) bool {
		for _, s := range cfg.Sources {
			if s.Name == name {
				return s.File != nil && s.File.Path != "-"
			}
		}
		return false
	}
}

// RolledPipelines lists the pipelines checkpoint m holds state or a
// rollover record of, without the old definitions' instances: the names
// as configured.
func RolledPipelines(m *checkpoint.Manifest) []string {
	names := m.Pipelines()
	olds := map[string]bool{}
	for k, b := range m.Extra {
		if name, ok := strings.CutPrefix(k, "rollover/"); ok {
			var r Rollover
			if json.Unmarshal(b, &r) == nil {
				olds[r.Old] = true
			}
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	names = slices.DeleteFunc(names, func(n string) bool { return olds[n] })
	slices.Sort(names)
	return names
}

// Rollover is the part the pipeline was given by SetRollover.
func (p *Pipeline) Rollover() RolloverRole { return p.role }

// grids are the window grids of a change from was to now (nil: the
// pipeline is removed), or why it cannot roll over.
func grids(was stateShape, now *stateShape) (old grid, next *grid, why string) {
	old, err := tumblingGrid(was.Window)
	if err != nil {
		return old, nil, "its old window " + err.Error()
	}
	if now == nil {
		return old, nil, ""
	}
	switch {
	case now.Source != was.Source:
		return old, nil, "its source changed"
	case now.Keyed != "" || was.Keyed != "":
		return old, nil, "it has per-key functions"
	}
	g, err := tumblingGrid(now.Window)
	if err != nil {
		return old, nil, "its new window " + err.Error()
	}
	if g.processing != old.processing {
		return old, nil, "its windows changed between event and processing time, and a cut lies on one of them"
	}
	if _, ok := commonBoundary(0, old, &g); !ok {
		return old, nil, "the old and the new windows share no boundary within 100,000 windows"
	}
	return old, &g, ""
}

// RollOverChange is what a change of pipeline old (configuration text
// oldSrc) into next does, for a reload: "" when nothing its results
// depend on changed, else the change; why says why it cannot roll over
// ("" when it can).
func RollOverChange(oldSrc []byte, old *config.Pipeline, nextSrc []byte, next *config.Pipeline) (change, why string) {
	was, now := pipelineShape(oldSrc, old), pipelineShape(nextSrc, next)
	changes := was.changes(now)
	if len(changes) == 0 || old.Window == nil && !old.Keyed() && next.Window == nil && !next.Keyed() {
		return "", ""
	}
	_, _, why = grids(was, &now)
	return changeText(changes), why
}

// RollOutWhy says why pipeline old (configuration text oldSrc) cannot
// roll out once removed from the configuration, as CheckRollover says it
// at a start, for a reload to refuse as a start does; "" when it can, or
// keeps no state.
func RollOutWhy(oldSrc []byte, old *config.Pipeline) string {
	if old.Window == nil && !old.Keyed() {
		return ""
	}
	g, _, why := grids(pipelineShape(oldSrc, old), nil)
	if f := old.From.Source.File; why == "" && g.processing && f != nil && f.Path != "-" {
		why = fileProcessingTime
	}
	return why
}

// CompileKeptRemoved compiles the definition of pipeline name, removed
// from cfg (the configuration text src), as checkpoint m recorded it,
// appended to the configuration: a removal that cannot roll out leaves
// the pipeline running as it was, with its state, instead of dropping
// it. It fails when m holds no definition of it or the block no longer
// fits the configuration (a source or sink it names is gone).
func CompileKeptRemoved(cfg *config.Config, src []byte, name string, m *checkpoint.Manifest) (*Plan, error) {
	block, ok := m.Extra[definitionExtraKey(name)]
	if !ok {
		return nil, fmt.Errorf("pipeline %q: the checkpoint holds no definition of it to keep running", name)
	}
	return compileIn(cfg, append(append(slices.Clip(src), "\n\n"...), block...), name, name, "previous")
}

// CompileKept compiles the previous definition of pipeline p of cfg (the
// configuration text src), whose block checkpoint m recorded, in place of
// its block: a change that cannot roll over leaves the pipeline running
// as it was. It fails when m holds no definition of p or the block no
// longer fits the configuration.
func CompileKept(cfg *config.Config, src []byte, p *config.Pipeline, m *checkpoint.Manifest) (*Plan, error) {
	block, ok := m.Extra[definitionExtraKey(p.Name)]
	r := p.BlockRange
	if !ok || r.Start.Byte < 0 || r.End.Byte > len(src) || r.Start.Byte >= r.End.Byte {
		return nil, fmt.Errorf("pipeline %q: the checkpoint holds no definition of it to keep running", p.Name)
	}
	text := append(append(append([]byte{}, src[:r.Start.Byte]...), block...), src[r.End.Byte:]...)
	return compileIn(cfg, text, p.Name, p.Name, "previous")
}

// Recompile compiles the pipeline's plan again from the configuration
// text it was compiled from, for a region restart: that of cfg, or an old
// or kept definition's own (CompileOld, CompileKept).
func (p *Pipeline) Recompile(cfg *config.Config) (*Plan, error) {
	if p.src == nil {
		pl, diags := Compile(cfg, p.cfg)
		if diags.HasErrors() {
			return nil, fmt.Errorf("agent: pipeline %q: %s", p.name, diags.Error())
		}
		return pl, nil
	}
	full, diags := config.Parse(p.src, cfg.Filename, nil)
	if diags.HasErrors() {
		return nil, fmt.Errorf("agent: pipeline %q: %s", p.name, diags.Error())
	}
	for _, q := range full.Pipelines {
		if q.Name == p.name {
			pl, diags := Compile(full, q)
			if diags.HasErrors() {
				return nil, fmt.Errorf("agent: pipeline %q: %s", p.name, diags.Error())
			}
			pl.src = p.src
			return pl, nil
		}
	}
	return nil, fmt.Errorf("agent: pipeline %q: missing from its own configuration text", p.name)
}
