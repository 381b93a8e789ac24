package source

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// MaxLineBytes is the longest line a file source delivers; a longer one ends
// Run with ErrLineTooLong.
const MaxLineBytes = 16 << 20

// ErrLineTooLong is returned (wrapped, with the path and line number) by a
// file source's Run for a line longer than MaxLineBytes.
var ErrLineTooLong = errors.New("source: line longer than 16 MiB")

// fileBufferBytes is the read buffer; longer lines are assembled in a
// separate buffer, so the common case copies each line once.
const fileBufferBytes = 1 << 20

// FileOptions configures a file source.
type FileOptions struct {
	// Path is the file to read; "-" reads standard input.
	Path string
	// Stdin replaces os.Stdin for Path "-" (tests).
	Stdin io.Reader
}

// File reads a file (JSONL or CSV: the decoder handles the format) as one
// message per non-empty line. Topic is the path; Offset is the 1-based line
// number, counting empty lines, so an offset points into the file; the line
// terminator ("\n" or "\r\n") is not part of Payload. Run returns nil at end
// of file. A read blocks Run: on standard input, cancelling ctx takes effect
// when the next line or end of input arrives.
type File struct {
	opts FileOptions
}

// NewFile returns a file source. The file is opened by Run.
func NewFile(opts FileOptions) Source { return &File{opts: opts} }

// Run implements Source. A batch holds up to MaxBatch lines, and is sent
// early when the reader has no more data at hand, so a slow pipe into stdin
// sees its lines without waiting for a full batch.
func (f *File) Run(ctx context.Context, out chan<- []Message) error {
	var r io.Reader
	if f.opts.Path == "-" {
		r = f.opts.Stdin
		if r == nil {
			r = os.Stdin
		}
	} else {
		fh, err := os.Open(f.opts.Path)
		if err != nil {
			return fmt.Errorf("source: open file: %w", err)
		}
		defer fh.Close()
		r = fh
	}
	br := bufio.NewReaderSize(r, fileBufferBytes)
	var (
		batch []Message
		line  uint64
		long  []byte // a line longer than the read buffer, being assembled
		a     arena
	)
	send := func() bool {
		if len(batch) == 0 {
			return true
		}
		select {
		case out <- batch:
			batch = nil
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		if ctx.Err() != nil {
			return nil
		}
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(chunk) > MaxLineBytes {
				return fmt.Errorf("source: %s line %d: %w", f.opts.Path, line+1, ErrLineTooLong)
			}
			long = append(long, chunk...)
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("source: read %s after line %d: %w", f.opts.Path, line, err)
		}
		if len(chunk) > 0 || len(long) > 0 {
			line++
			payload, inReader := chunk, true
			if long != nil {
				payload, long, inReader = append(long, chunk...), nil, false
			}
			payload = trimEOL(payload)
			if len(payload) > MaxLineBytes {
				return fmt.Errorf("source: %s line %d: %w", f.opts.Path, line, ErrLineTooLong)
			}
			if len(payload) > 0 {
				if inReader {
					payload = a.copy(payload) // the reader reuses its buffer
				}
				if batch == nil {
					batch = make([]Message, 0, MaxBatch)
				}
				batch = append(batch, Message{Topic: f.opts.Path, Payload: payload, Arrival: time.Now().UnixMilli(), Offset: line})
			}
		}
		if err != nil { // io.EOF
			send()
			return nil
		}
		if len(batch) == MaxBatch || br.Buffered() == 0 {
			if !send() {
				return nil
			}
		}
	}
}

// trimEOL removes one trailing "\n" or "\r\n".
func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}
