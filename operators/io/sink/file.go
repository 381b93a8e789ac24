package sink

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/state/vfs"
)

// FileOptions configure a file sink.
type FileOptions struct {
	// Path of the live file. Parent directories are created (0755, durably:
	// vfs.MkdirAllSynced); the file
	// is created 0644 or appended to if it exists.
	Path string
	// RotateSize is the size in bytes past which the file is rotated before
	// the next line is written: a file never exceeds RotateSize unless it
	// holds a single longer line. Zero or negative never rotates.
	RotateSize int64
	// MaxFiles is how many rotated files (Path.1 newest … Path.MaxFiles
	// oldest) are kept besides the live one. Zero means 10.
	MaxFiles int
	// Sync makes Flush (and rotation and Close) fsync the file, and rotation
	// fsync the directory, so flushed lines survive power loss. Without it
	// they survive a process crash but not power loss. It also fsyncs the
	// directory once at open, so a new live file's entry is durable.
	Sync bool
	// FS is the file system the file lives on. Nil: vfs.Default.
	FS vfs.FS
}

const (
	defaultMaxFiles = 10
	fileBufferSize  = 64 << 10
)

// NewFile opens a JSON Lines file sink: each item's payload followed by a
// newline, through a 64 KiB buffer (Write hands data to the OS only when the
// buffer fills; Flush always does).
//
// If the existing file does not end with a newline (a line torn by a crash
// or by a write that met a full disk), it is cut back to its last newline,
// so every line in it parses; an at-least-once writer writes that record
// again.
// Rotation renames Path.i to Path.i+1 from the oldest down, dropping what
// falls past MaxFiles, then Path to Path.1, and creates a new Path. After a
// write or rotation error the sink is broken: every later call returns that
// error, and the caller should close it and open a new one.
func NewFile(opts FileOptions) (Sink, error) {
	if opts.Path == "" {
		return nil, errors.New("sink: file path is empty")
	}
	if opts.MaxFiles <= 0 {
		opts.MaxFiles = defaultMaxFiles
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if err := vfs.MkdirAllSynced(opts.FS, filepath.Dir(opts.Path), 0o755); err != nil {
		return nil, fmt.Errorf("sink: create directory of %s: %w", opts.Path, err)
	}
	f := &file{opts: opts}
	if err := f.open(); err != nil {
		return nil, err
	}
	if opts.Sync {
		// The live file may be new: its entry must be as durable as the
		// lines Flush syncs into it.
		if err := f.syncDir(); err != nil {
			f.f.Close()
			return nil, err
		}
	}
	return f, nil
}

type file struct {
	mu     sync.Mutex
	opts   FileOptions
	f      vfs.File
	w      *bufio.Writer
	size   int64 // bytes in the live file, buffered ones included
	err    error // sticky write or rotation error
	closed bool
}

// open opens (or creates) the live file and positions size at its end,
// cutting off a torn last line.
func (f *file) open() error {
	fh, err := f.opts.FS.OpenFile(f.opts.Path, os.O_RDWR|os.O_CREATE|os.O_APPEND)
	if err != nil {
		return fmt.Errorf("sink: open %s: %w", f.opts.Path, err)
	}
	info, err := fh.Stat()
	if err != nil {
		fh.Close()
		return fmt.Errorf("sink: stat %s: %w", f.opts.Path, err)
	}
	f.size = info.Size()
	if f.w == nil {
		f.w = bufio.NewWriterSize(fh, fileBufferSize)
	} else {
		f.w.Reset(fh)
	}
	f.f = fh
	if f.size > 0 {
		end, err := completeLinesEnd(fh, f.size)
		if err != nil {
			fh.Close()
			return fmt.Errorf("sink: read end of %s: %w", f.opts.Path, err)
		}
		if end < f.size {
			// A torn last line (a crash, or a write that met a full disk):
			// its record was never flushed whole, so it is written again
			// (at least once) and the fragment is cut off, leaving every
			// line whole.
			if err := fh.Truncate(end); err != nil {
				fh.Close()
				return fmt.Errorf("sink: cut the torn last line of %s: %w", f.opts.Path, err)
			}
			if f.opts.Sync {
				if err := fh.Sync(); err != nil {
					fh.Close()
					return fmt.Errorf("sink: sync %s: %w", f.opts.Path, err)
				}
			}
			f.size = end
		}
	}
	return nil
}

// completeLinesEnd returns the size of the file's complete lines: the
// offset just past its last newline, 0 if it has none.
func completeLinesEnd(r io.ReaderAt, size int64) (int64, error) {
	var buf [4096]byte
	for end := size; end > 0; {
		start := max(end-int64(len(buf)), 0)
		chunk := buf[:end-start]
		if _, err := r.ReadAt(chunk, start); err != nil && err != io.EOF {
			return 0, err
		}
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

func (f *file) Write(items []record.Item) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.usable("write"); err != nil {
		return err
	}
	for i := range items {
		line := int64(len(items[i].Payload)) + 1
		if f.opts.RotateSize > 0 && f.size > 0 && f.size+line > f.opts.RotateSize {
			if err := f.rotate(); err != nil {
				f.err = err
				return err
			}
		}
		f.w.Write(items[i].Payload)
		if err := f.w.WriteByte('\n'); err != nil {
			f.err = fmt.Errorf("sink: write %s: %w", f.opts.Path, err)
			return f.err
		}
		f.size += line
	}
	return nil
}

// rotate closes the live file, shifts the rotated ones and opens a new one.
func (f *file) rotate() error {
	if err := f.flushLocked(); err != nil {
		return err
	}
	if err := f.f.Close(); err != nil {
		return fmt.Errorf("sink: close %s for rotation: %w", f.opts.Path, err)
	}
	// Renaming onto Path.MaxFiles replaces it, which drops the oldest file.
	for i := f.opts.MaxFiles - 1; i >= 1; i-- {
		err := f.opts.FS.Rename(f.rotated(i), f.rotated(i+1))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sink: rotate %s: %w", f.rotated(i), err)
		}
	}
	if err := f.opts.FS.Rename(f.opts.Path, f.rotated(1)); err != nil {
		return fmt.Errorf("sink: rotate %s: %w", f.opts.Path, err)
	}
	if err := f.open(); err != nil {
		return err
	}
	if f.opts.Sync {
		if err := f.syncDir(); err != nil {
			return err
		}
	}
	return nil
}

func (f *file) rotated(i int) string { return f.opts.Path + "." + strconv.Itoa(i) }

func (f *file) syncDir() error {
	dir := filepath.Dir(f.opts.Path)
	if err := f.opts.FS.SyncDir(dir); err != nil {
		return fmt.Errorf("sink: sync directory %s: %w", dir, err)
	}
	return nil
}

func (f *file) flushLocked() error {
	if err := f.w.Flush(); err != nil {
		return fmt.Errorf("sink: write %s: %w", f.opts.Path, err)
	}
	if f.opts.Sync {
		if err := f.f.Sync(); err != nil {
			return fmt.Errorf("sink: sync %s: %w", f.opts.Path, err)
		}
	}
	return nil
}

func (f *file) usable(op string) error {
	if f.closed {
		return fmt.Errorf("sink: file %s %s: %w", f.opts.Path, op, ErrClosed)
	}
	return f.err
}

func (f *file) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.usable("flush"); err != nil {
		return err
	}
	if err := f.flushLocked(); err != nil {
		f.err = err
		return err
	}
	return nil
}

func (f *file) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("sink: file %s close: %w", f.opts.Path, ErrClosed)
	}
	f.closed = true
	err := f.err
	if err == nil {
		err = f.flushLocked()
	}
	if f.f != nil {
		if cerr := f.f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("sink: close %s: %w", f.opts.Path, cerr)
		}
	}
	return err
}
