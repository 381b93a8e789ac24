package sink

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/record"
)

func mustNewFile(t *testing.T, opts FileOptions) Sink {
	t.Helper()
	s, err := NewFile(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func lineItems(from, to int) []record.Item {
	var items []record.Item
	for i := from; i < to; i++ {
		items = append(items, record.Item{Payload: fmt.Appendf(nil, `{"n":%03d}`, i)}) // 9 bytes + newline
	}
	return items
}

func TestFile_WriteFlushReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "out.jsonl")
	s := mustNewFile(t, FileOptions{Path: path, Sync: true})
	if err := s.Write(lineItems(0, 2)); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, path); got != "" {
		t.Fatalf("before Flush the file holds %q; Write should buffer", got)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := mustRead(t, path), "{\"n\":000}\n{\"n\":001}\n"; got != want {
		t.Fatalf("after Flush: %q, want %q", got, want)
	}
	if err := s.Write(lineItems(2, 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{"Write": s.Write(lineItems(0, 1)), "Flush": s.Flush(), "Close": s.Close()} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}

	// Reopening appends.
	s = mustNewFile(t, FileOptions{Path: path})
	if err := s.Write(lineItems(3, 4)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := mustRead(t, path), "{\"n\":000}\n{\"n\":001}\n{\"n\":002}\n{\"n\":003}\n"; got != want {
		t.Fatalf("after reopen: %q, want %q", got, want)
	}
}

// A line torn by a crash or a full disk is cut off at the next open, so
// every line of the file parses; the at-least-once writer writes its
// record again.
func TestFile_ReopenAfterTornLine(t *testing.T) {
	long := "{\"big\":\"" + strings.Repeat("x", 20_000) // longer than a read chunk
	tests := []struct {
		name, before, want string
	}{
		{"torn", "{\"n\":000}\n{\"n\":0", "{\"n\":000}\n{\"n\":001}\n"},
		{"long torn line", "{\"n\":000}\n" + long, "{\"n\":000}\n{\"n\":001}\n"},
		{"only a torn line", long, "{\"n\":001}\n"},
		{"whole", "{\"n\":000}\n", "{\"n\":000}\n{\"n\":001}\n"},
		{"empty", "", "{\"n\":001}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			if err := os.WriteFile(path, []byte(tc.before), 0o644); err != nil {
				t.Fatal(err)
			}
			s := mustNewFile(t, FileOptions{Path: path, Sync: true})
			if err := s.Write(lineItems(1, 2)); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if got := mustRead(t, path); got != tc.want {
				t.Fatalf("got %q, want %q: the torn line must be cut off", got, tc.want)
			}
		})
	}
}

func TestFile_Rotation(t *testing.T) {
	tests := []struct {
		name       string
		rotateSize int64
		maxFiles   int
		lines      int
		want       map[string]string // file suffix → first..last line numbers
	}{
		{"no rotation", 0, 0, 25, map[string]string{"": "000-024"}},
		{"exact fit", 30, 0, 9, map[string]string{"": "006-008", ".1": "003-005", ".2": "000-002"}},
		{"keeps max files", 20, 2, 10, map[string]string{"": "008-009", ".1": "006-007", ".2": "004-005"}},
		{"line larger than limit", 5, 3, 2, map[string]string{"": "001-001", ".1": "000-000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "late.jsonl")
			s := mustNewFile(t, FileOptions{Path: path, RotateSize: tt.rotateSize, MaxFiles: tt.maxFiles, Sync: true})
			// Several small batches, so rotation also happens across Writes.
			for i := 0; i < tt.lines; i += 2 {
				if err := s.Write(lineItems(i, min(i+2, tt.lines))); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != len(tt.want) {
				t.Errorf("%d files, want %d", len(entries), len(tt.want))
			}
			for suffix, span := range tt.want {
				var first, last int
				fmt.Sscanf(span, "%d-%d", &first, &last)
				var want strings.Builder
				for _, it := range lineItems(first, last+1) {
					want.Write(it.Payload)
					want.WriteByte('\n')
				}
				if got := mustRead(t, path+suffix); got != want.String() {
					t.Errorf("late.jsonl%s = %q, want %q", suffix, got, want.String())
				}
				if tt.rotateSize > 10 && int64(len(want.String())) > tt.rotateSize {
					t.Errorf("late.jsonl%s exceeds RotateSize", suffix)
				}
			}
		})
	}
}

func TestFile_RotationContinuesAfterReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	s := mustNewFile(t, FileOptions{Path: path, RotateSize: 20})
	if err := s.Write(lineItems(0, 1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// The reopened sink counts the existing 10 bytes towards RotateSize.
	s = mustNewFile(t, FileOptions{Path: path, RotateSize: 20})
	if err := s.Write(lineItems(1, 3)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got, want := mustRead(t, path+".1"), "{\"n\":000}\n{\"n\":001}\n"; got != want {
		t.Errorf("out.jsonl.1 = %q, want %q", got, want)
	}
	if got, want := mustRead(t, path), "{\"n\":002}\n"; got != want {
		t.Errorf("out.jsonl = %q, want %q", got, want)
	}
}

func TestNewFile_Errors(t *testing.T) {
	if _, err := NewFile(FileOptions{}); err == nil {
		t.Error("NewFile with an empty path succeeded")
	}
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := NewFile(FileOptions{Path: filepath.Join(blocker, "out.jsonl")})
	if !errors.Is(err, os.ErrExist) && !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("NewFile under a regular file = %v, want a wrapped directory error", err)
	}
}

func BenchmarkFile_Write(b *testing.B) {
	s, err := NewFile(FileOptions{Path: filepath.Join(b.TempDir(), "out.jsonl"), RotateSize: 64 << 20, MaxFiles: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := benchResult()
	items := make([]record.Item, 100)
	payloads := make([][]byte, len(items))
	for i := range items {
		payloads[i] = record.AppendJSON(nil, "gw-0042", r)
		items[i] = record.Item{Payload: payloads[i], Result: r}
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(items) * (len(payloads[0]) + 1)))
	for b.Loop() {
		if err := s.Write(items); err != nil {
			b.Fatal(err)
		}
	}
}
