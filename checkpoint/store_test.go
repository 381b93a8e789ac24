package checkpoint

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/state/vfs"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata/")

// checkGolden compares got with testdata/name; -rewrite updates the file
// (review the diff).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *rewrite {
		if err := os.WriteFile(path, []byte(got+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if strings.TrimSuffix(string(want), "\n") != got {
		t.Errorf("%s differs (run with -rewrite and review the diff)\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// entriesOf returns an iterator in state's shape over es.
func entriesOf(es []testEntry) func(fn func(bucket, key, value []byte, deleted bool) error) error {
	return func(fn func(bucket, key, value []byte, deleted bool) error) error {
		for _, e := range es {
			if err := fn([]byte(e.bucket), []byte(e.key), []byte(e.value), e.deleted); err != nil {
				return err
			}
		}
		return nil
	}
}

func mustWriteSnapshot(t *testing.T, s *Store, task string, kind Kind, id uint64, es []testEntry) FileRef {
	t.Helper()
	ref, err := s.WriteSnapshot(task, "temp_1m", kind, id, entriesOf(es))
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func testManifest(id uint64, kind Kind, files ...FileRef) *Manifest {
	return &Manifest{FormatVersion: ManifestVersion, ID: id, Kind: kind, Time: time.Date(2026, 11, 29, 10, 0, int(id), 0, time.UTC),
		Files: files, SourcePositions: map[string]uint64{"sensors": id * 100}, ConfigFingerprint: "cafe"}
}

func mustWriteManifest(t *testing.T, s *Store, m *Manifest) {
	t.Helper()
	if err := s.WriteManifest(m); err != nil {
		t.Fatal(err)
	}
}

// docs/architecture.md "Checkpoints" 3 and 4: a snapshot file is durable under its
// content address (temp, fsync, rename, fsync dir) before the manifest is
// written the same way. The golden file pins the order.
func TestStore_DurabilityOrder(t *testing.T) {
	s, rfs := newRecordingStore(t)
	ref := mustWriteSnapshot(t, s, "window/0", KindFull, 1, []testEntry{{"b", "k", "v", false}})
	mustWriteManifest(t, s, testManifest(1, KindFull, ref))
	checkGolden(t, "durability_order.txt", rfs.log())
}

func TestStore_SnapshotRoundTrip(t *testing.T) {
	s, _ := newRecordingStore(t)
	es := manyEntries(5000)
	ref := mustWriteSnapshot(t, s, "window/0", KindIncremental, 3, es)
	if ref.Kind != KindIncremental || ref.Checkpoint != 3 || ref.Task != "window/0" || ref.Pipeline != "temp_1m" || !strings.HasPrefix(ref.Name, "files/") {
		t.Errorf("ref %+v", ref)
	}
	var got []testEntry
	err := s.ReadSnapshot(ref, func(b, k, v []byte, d bool) error {
		got = append(got, testEntry{string(b), string(k), string(v), d})
		return nil
	})
	if err != nil || !slices.Equal(got, es) {
		t.Fatalf("ReadSnapshot: %d entries, err %v", len(got), err)
	}
	// Content addressing: the same content is stored once.
	if again := mustWriteSnapshot(t, s, "window/0", KindIncremental, 3, es); again.Name != ref.Name {
		t.Errorf("same content, names %s and %s", ref.Name, again.Name)
	}
	if files, _ := s.Files(); len(files) != 1 {
		t.Errorf("files %v, want one", files)
	}
}

// Every operation of writing a snapshot and its manifest fails in turn (as
// pebble's error_test does): the write reports the error and the store never
// shows a manifest that references a missing or partial file.
func TestStore_FailEveryOperation(t *testing.T) {
	s, rfs := newRecordingStore(t)
	mustWriteSnapshot(t, s, "a", KindFull, 1, nil)
	total := len(rfs.ops)
	if total == 0 {
		t.Fatal("no ops recorded")
	}
	for i := 1; i <= total+6; i++ {
		dir := t.TempDir()
		rfs := &recordingFS{FS: vfs.Default, root: dir}
		s, err := OpenStore(rfs, dir)
		if err != nil {
			t.Fatal(err)
		}
		rfs.reset()
		rfs.failAt = i
		ref, err := s.WriteSnapshot("a", "p", KindFull, 1, entriesOf(manyEntries(3)))
		if err == nil {
			err = s.WriteManifest(testManifest(1, KindFull, ref))
		}
		if !errors.Is(err, errInjected) {
			t.Fatalf("failing op %d (%s): err = %v", i, rfs.ops[len(rfs.ops)-1], err)
		}
		rfs.failAt = 0
		// Reopen as after a crash: a visible manifest must restore.
		s, err = OpenStore(vfs.Default, dir)
		if err != nil {
			t.Fatal(err)
		}
		sel, err := s.SelectRestore("")
		if err != nil && !errors.Is(err, ErrNoCheckpoint) {
			t.Fatalf("failing op %d: SelectRestore: %v", i, err)
		}
		if len(sel.Skipped) != 0 {
			t.Fatalf("failing op %d: skipped %v", i, sel.Skipped)
		}
		for _, sub := range []string{"files", "manifests"} {
			names, _ := vfs.Default.List(filepath.Join(dir, sub))
			for _, n := range names {
				if strings.HasSuffix(n, ".tmp") {
					t.Errorf("failing op %d: temp file %s left after OpenStore", i, n)
				}
			}
		}
	}
}

func TestStore_OpenRemovesTempFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	sf, err := s.CreateSnapshot("a", "p", KindFull, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := sf.Add([]byte("b"), []byte("k"), []byte("v"), false); err != nil {
		t.Fatal(err)
	}
	// Crash: the snapshot is never committed.
	rfs := &recordingFS{FS: vfs.Default, root: dir}
	if _, err := OpenStore(rfs, dir); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "open_removes_temp.txt", rfs.log())
}

func TestStore_WriteManifestRefuses(t *testing.T) {
	s, _ := newRecordingStore(t)
	ref := mustWriteSnapshot(t, s, "a", KindFull, 1, nil)
	m := testManifest(1, KindFull, ref)
	m.Time = time.Time{}
	if err := s.WriteManifest(m); err == nil {
		t.Error("manifest without time written")
	}
	m.Time = time.Now()
	mustWriteManifest(t, s, m)
	if err := s.WriteManifest(m); err == nil {
		t.Error("manifest written twice")
	}
}

func TestManifest_JSON(t *testing.T) {
	s, _ := newRecordingStore(t)
	ref := mustWriteSnapshot(t, s, "window/0", KindFull, 7, []testEntry{{"b", "k", "v", false}})
	m := testManifest(7, KindFull, ref)
	m.Extra = map[string][]byte{"sink/file/pending": []byte(`["part-7"]`)}
	m.DurationMs, m.AlignmentMs = 12, 3
	b, err := MarshalManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "manifest.json", strings.TrimSuffix(string(b), "\n"))
	got, err := UnmarshalManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != 7 || got.Kind != KindFull || !got.Time.Equal(m.Time) || string(got.Extra["sink/file/pending"]) != `["part-7"]` || got.Files[0] != ref {
		t.Errorf("round trip: %+v", got)
	}
	if p := got.Pipelines(); !slices.Equal(p, []string{"temp_1m"}) || len(got.PipelineFiles("temp_1m")) != 1 {
		t.Errorf("pipelines %v", p)
	}
}

// TestUnmarshalManifest_OtherVersionRefused: a manifest of another format
// version (an earlier development build's, or a newer Eddy's) is
// corruption whose message names the version found and the one read.
func TestUnmarshalManifest_OtherVersionRefused(t *testing.T) {
	good, err := MarshalManifest(testManifest(5, KindFull))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []int{ManifestVersion - 1, ManifestVersion + 1} {
		src := strings.Replace(string(good), fmt.Sprintf(`"format_version": %d`, ManifestVersion), fmt.Sprintf(`"format_version": %d`, v), 1)
		_, err := UnmarshalManifest([]byte(src))
		if !IsCorruption(err) {
			t.Fatalf("version %d: err = %v, want corruption", v, err)
		}
		if want := fmt.Sprintf("format version %d, this build reads version %d only", v, ManifestVersion); !strings.Contains(err.Error(), want) {
			t.Errorf("version %d: err = %v, want it to say %q", v, err, want)
		}
	}
}

func TestUnmarshalManifest_Invalid(t *testing.T) {
	good, err := MarshalManifest(testManifest(5, KindFull))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		src  string
	}{
		{"garbage", "\x00\x01garbage"},
		{"truncated", string(good[:len(good)/2])},
		{"future version", strings.Replace(string(good), fmt.Sprintf(`"format_version": %d`, ManifestVersion), `"format_version": 9`, 1)},
		{"version 0", strings.Replace(string(good), fmt.Sprintf(`"format_version": %d`, ManifestVersion), `"format_version": 0`, 1)},
		{"bad kind", strings.Replace(string(good), `"kind": "full"`, `"kind": "partial"`, 1)},
		{"no time", strings.Replace(string(good), `"time": "2026-11-29T10:00:05Z"`, `"time": "0001-01-01T00:00:00Z"`, 1)},
		{"file not content-addressed", `{"format_version":2,"id":5,"kind":"full","time":"2026-01-01T00:00:00Z","files":[{"name":"../x.snap","size":100,"sha256":"` + strings.Repeat("ab", 32) + `","kind":"full","checkpoint":5,"task":"a"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := UnmarshalManifest([]byte(tt.src)); !IsCorruption(err) {
				t.Errorf("err = %v, want corruption", err)
			}
		})
	}
}

// failOpenFS fails Open of one name with an I/O error.
type failOpenFS struct {
	vfs.FS
	name string
}

func (f failOpenFS) Open(name string) (vfs.File, error) {
	if strings.HasSuffix(name, f.name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errInjected}
	}
	return f.FS.Open(name)
}

// keyEntries iterates n entries in state's shape: bucket "window/temp_1m",
// key "device-NNNNNNN|window", 16-byte value; no allocation per entry.
func keyEntries(n int) func(fn func(bucket, key, value []byte, deleted bool) error) error {
	return func(fn func(bucket, key, value []byte, deleted bool) error) error {
		bucket, value := []byte("window/temp_1m"), []byte("0123456789abcdef")
		key := []byte("device-0000000|1700000000")
		for i := range n {
			for j, k := 13, i; j >= 7; j, k = j-1, k/10 {
				key[j] = byte('0' + k%10)
			}
			if err := fn(bucket, key, value, false); err != nil {
				return err
			}
		}
		return nil
	}
}

// BenchmarkStore_Incremental10k writes and fsyncs an incremental snapshot of
// 10,000 entries: 1% of 1M keys changed (target: ≤ 50 ms, bytes
// ≤ 2× the changed entries).
func BenchmarkStore_Incremental10k(b *testing.B) {
	s, err := OpenStore(vfs.Default, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	const n = 10_000
	raw := int64(n * (14 + 25 + 16))
	b.SetBytes(raw)
	b.ReportAllocs()
	var ref FileRef
	id := uint64(0)
	for b.Loop() {
		id++
		if ref, err = s.WriteSnapshot("window/0", "temp_1m", KindIncremental, id, keyEntries(n)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(ref.Size)/float64(raw), "file/raw")
}

// BenchmarkStore_Restore1M reads and verifies (CRCs, trailer, size, SHA-256)
// a full snapshot of 1M entries from local disk (acceptance: < 2 s).
func BenchmarkStore_Restore1M(b *testing.B) {
	s, err := OpenStore(vfs.Default, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	const n = 1_000_000
	ref, err := s.WriteSnapshot("window/0", "temp_1m", KindFull, 1, keyEntries(n))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(ref.Size)
	b.ReportAllocs()
	for b.Loop() {
		count := 0
		if err := s.ReadSnapshot(ref, func(_, _, _ []byte, _ bool) error { count++; return nil }); err != nil || count != n {
			b.Fatal(count, err)
		}
	}
}

// Tasks write their snapshots concurrently into one store.
func TestStore_ConcurrentSnapshots(t *testing.T) {
	s, err := OpenStore(vfs.Default, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const tasks = 8
	refs := make([]FileRef, tasks)
	errs := make(chan error, tasks)
	for i := range tasks {
		go func() {
			var err error
			refs[i], err = s.WriteSnapshot(fmt.Sprintf("window/%d", i), "p", KindFull, 1, keyEntries(1000*(i+1)))
			errs <- err
		}()
	}
	for range tasks {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range refs {
		if err := s.VerifyFile(r); err != nil {
			t.Error(err)
		}
	}
	if files, _ := s.Files(); len(files) != tasks {
		t.Errorf("%d files, want %d", len(files), tasks)
	}
}
