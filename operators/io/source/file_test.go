package source

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runFile runs a file source to completion and returns its batches.
func runFile(t testing.TB, opts FileOptions) ([][]Message, error) {
	t.Helper()
	out := make(chan []Message, 1024)
	err := NewFile(opts).Run(context.Background(), out)
	close(out)
	var batches [][]Message
	for b := range out {
		batches = append(batches, b)
	}
	return batches, err
}

func writeFile(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFile_LinesAndOffsets(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []string // payloads
		offsets []uint64
	}{
		{"empty file", "", nil, nil},
		{"no trailing newline", "a\nb", []string{"a", "b"}, []uint64{1, 2}},
		{"empty lines skipped, offsets kept", "\na\n\n\nb\n\n", []string{"a", "b"}, []uint64{2, 5}},
		{"crlf", "a,1\r\nb,2\r\n", []string{"a,1", "b,2"}, []uint64{1, 2}},
		{"only newlines", "\n\r\n\n", nil, nil},
		{"inner cr kept", "a\rb\n", []string{"a\rb"}, []uint64{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, viaStdin := range []bool{false, true} {
				opts := FileOptions{Path: writeFile(t, tt.content)}
				if viaStdin {
					opts = FileOptions{Path: "-", Stdin: strings.NewReader(tt.content)}
				}
				batches, err := runFile(t, opts)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				var offsets []uint64
				for _, b := range batches {
					for _, m := range b {
						got = append(got, string(m.Payload))
						offsets = append(offsets, m.Offset)
						if m.Topic != opts.Path || m.Arrival == 0 || m.ack != nil {
							t.Errorf("message %+v: want topic %q, an arrival time and no ack", m, opts.Path)
						}
					}
				}
				if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(offsets) != len(tt.offsets) {
					t.Fatalf("stdin=%v: got %q offsets %v, want %q %v", viaStdin, got, offsets, tt.want, tt.offsets)
				}
				for i := range offsets {
					if offsets[i] != tt.offsets[i] {
						t.Fatalf("stdin=%v: offsets %v, want %v", viaStdin, offsets, tt.offsets)
					}
				}
			}
		})
	}
}

func TestFile_Batches(t *testing.T) {
	var sb strings.Builder
	for i := range 1000 {
		sb.WriteString(`{"n":` + strconv.Itoa(i) + "}\n")
	}
	batches, err := runFile(t, FileOptions{Path: writeFile(t, sb.String())})
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) != 2 || len(batches[0]) != MaxBatch || len(batches[1]) != 1000-MaxBatch {
		t.Fatalf("batch sizes: %d batches, want [512 488]", len(batches))
	}
	// Payloads must survive later reads (they are copies, not the reader's buffer).
	if got := string(batches[0][7].Payload); got != `{"n":7}` {
		t.Fatalf("payload 8 = %q", got)
	}
	if got := batches[1][487].Offset; got != 1000 {
		t.Fatalf("last offset %d, want 1000", got)
	}
}

func TestFile_LongLines(t *testing.T) {
	long := bytes.Repeat([]byte("x"), 3*fileBufferBytes+17) // spans several reader buffers
	content := "a\n" + string(long) + "\nb\n"
	batches, err := runFile(t, FileOptions{Path: writeFile(t, content)})
	if err != nil {
		t.Fatal(err)
	}
	var got []Message
	for _, b := range batches {
		got = append(got, b...)
	}
	if len(got) != 3 || !bytes.Equal(got[1].Payload, long) || string(got[0].Payload) != "a" || string(got[2].Payload) != "b" || got[2].Offset != 3 {
		t.Fatalf("got %d messages; long line intact: %v", len(got), len(got) > 1 && bytes.Equal(got[1].Payload, long))
	}

	tooLong := "ok\n" + strings.Repeat("y", MaxLineBytes+1) + "\n"
	_, err = runFile(t, FileOptions{Path: "-", Stdin: strings.NewReader(tooLong)})
	if !errors.Is(err, ErrLineTooLong) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want ErrLineTooLong at line 2", err)
	}
	// Exactly MaxLineBytes is allowed.
	exact := strings.Repeat("z", MaxLineBytes) + "\r\n"
	batches, err = runFile(t, FileOptions{Path: "-", Stdin: strings.NewReader(exact)})
	if err != nil || len(batches) != 1 || len(batches[0][0].Payload) != MaxLineBytes {
		t.Fatalf("line of exactly MaxLineBytes: err %v", err)
	}
}

func TestFile_MissingFile(t *testing.T) {
	_, err := runFile(t, FileOptions{Path: filepath.Join(t.TempDir(), "absent.jsonl")})
	if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "source: ") {
		t.Fatalf("err = %v, want a source error wrapping fs.ErrNotExist", err)
	}
}

func TestFile_Cancel(t *testing.T) {
	var sb strings.Builder
	for range 5000 {
		sb.WriteString("line\n")
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan []Message) // unbuffered: Run blocks on the first batch
	done := make(chan error)
	go func() { done <- NewFile(FileOptions{Path: writeFile(t, sb.String())}).Run(ctx, out) }()
	<-out
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
}

func BenchmarkFile(b *testing.B) {
	line := `{"device":"sensor-3","ts":1700000000000,"temp":21.53,"humidity":40.1}` + "\n"
	content := strings.Repeat(line, 100000)
	path := writeFile(b, content)
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	for b.Loop() {
		out := make(chan []Message, 1024)
		n := 0
		go func() {
			for batch := range out {
				n += len(batch)
			}
		}()
		if err := NewFile(FileOptions{Path: path}).Run(context.Background(), out); err != nil {
			b.Fatal(err)
		}
		close(out)
	}
	b.ReportMetric(100000, "lines/op")
}
