package upload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/eddy-edge/eddy/state/vfs"
)

// FileRef names a local checkpoint file and, optionally, what it must hold.
type FileRef struct {
	// Name is the object's name below <prefix>files/, e.g. "<sha256>.snap".
	// Names are content-addressed: one name always holds the same bytes.
	Name string
	// LocalPath is the file on the device.
	LocalPath string
	// SHA256 is the hex SHA-256 of the file, from its manifest. When set,
	// Size and SHA256 are checked before anything is uploaded, and a file
	// that differs is refused with ErrLocalMismatch. "": not checked.
	SHA256 string
	// Size is the file's length in bytes; checked only with SHA256.
	Size int64
}

// PutFile uploads the local file at localPath as <prefix>files/<name>,
// compressed and (with an EncryptionKey) encrypted. name must identify the
// content (content addressing): when an object of that name already exists
// with the same plaintext size and the same encryption key, nothing is
// uploaded. Files larger than LargeFileSize go in chunks that a repeated call
// resumes (see chunked.go). The object becomes visible only complete: a
// single PUT, or for a chunked file its index, written after every chunk.
// Errors name the object; see the sentinels in errors.go.
func (c *Client) PutFile(ctx context.Context, name, localPath string) error {
	return c.PutFileRef(ctx, FileRef{Name: name, LocalPath: localPath})
}

// PutFileRef is PutFile with the file's expected size and SHA-256 checked,
// and also compared with the existing object's recorded SHA-256 before it is
// skipped.
func (c *Client) PutFileRef(ctx context.Context, f FileRef) error {
	if err := validateName("file", f.Name); err != nil {
		return err
	}
	if err := c.Check(ctx); err != nil {
		return err
	}
	file, err := c.fs.Open(f.LocalPath)
	if err != nil {
		return fmt.Errorf("upload: put file %s: %w", f.Name, err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return fmt.Errorf("upload: put file %s: %w", f.Name, err)
	}
	size := st.Size()
	if f.SHA256 != "" && size != f.Size {
		return fmt.Errorf("upload: put file %s: %w: %s is %d bytes, want %d", f.Name, ErrLocalMismatch, f.LocalPath, size, f.Size)
	}
	key := c.key(filesDir, f.Name)
	info, err := c.stat(ctx, key)
	switch {
	case err == nil && c.sameForm(info.UserMetadata, size, f.SHA256):
		c.objectsSkipped.Add(1)
		return nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return err
	}
	c.progress("upload", f.Name, 0, size)
	if size > c.largeFile {
		err = c.putChunked(ctx, file, f, size, key)
	} else {
		err = c.putSingle(ctx, file, f, size, key)
	}
	if err != nil {
		return err
	}
	c.progress("upload", f.Name, size, size)
	c.log.Debug("upload: put file", "name", f.Name, "bytes", size)
	return nil
}

func (c *Client) putSingle(ctx context.Context, file io.Reader, f FileRef, size int64, key string) error {
	buf, n, sum, err := c.encodeObject(file, key)
	if err != nil {
		return fmt.Errorf("upload: put file %s: %w", f.Name, err)
	}
	defer c.putBuf(buf)
	got := hex.EncodeToString(sum[:])
	if n != size {
		return fmt.Errorf("upload: put file %s: %w: %s changed while read (%d bytes, then %d)", f.Name, ErrLocalMismatch, f.LocalPath, size, n)
	}
	if f.SHA256 != "" && got != f.SHA256 {
		return fmt.Errorf("upload: put file %s: %w: %s has SHA-256 %s, want %s", f.Name, ErrLocalMismatch, f.LocalPath, got, f.SHA256)
	}
	return c.putObject(ctx, key, buf.Bytes(), c.metadata(layoutSingle, n, got))
}

// GetFile downloads <prefix>files/<name> to localPath: decrypts, decompresses
// and verifies the SHA-256 of the plaintext against wantSHA256 (hex; "" uses
// the SHA-256 recorded in the object's metadata, which only catches damage,
// not tampering). localPath appears only complete and verified (temp file,
// fsync, rename), and once GetFile returns nil it survives a power cut (its
// directory is fsynced too); on any error it is left as it was. The file
// system is Options.FS. A crash or power cut during a download can leave a
// temporary file beside localPath, which IsDownloadTemp recognises. An object that fails
// verification is ErrCorrupt naming it (for a chunked file, the chunk);
// ErrWrongKey when encrypted with another key; ErrNotFound when missing.
func (c *Client) GetFile(ctx context.Context, name, localPath, wantSHA256 string) error {
	return c.getFile(ctx, name, localPath, wantSHA256, -1)
}

// GetFileRef is GetFile of f.Name into f.LocalPath that also checks f.Size
// when f.SHA256 is set: the download stops with ErrCorrupt as soon as the
// plaintext runs past the size the checkpoint's manifest records, before
// more of it is hashed or written, and a shorter one is ErrCorrupt too.
func (c *Client) GetFileRef(ctx context.Context, f FileRef) error {
	size := int64(-1)
	if f.SHA256 != "" {
		size = f.Size
	}
	return c.getFile(ctx, f.Name, f.LocalPath, f.SHA256, size)
}

// getFile is GetFile with the plaintext capped at wantSize bytes (-1: no
// cap).
func (c *Client) getFile(ctx context.Context, name, localPath, wantSHA256 string, wantSize int64) error {
	if err := validateName("file", name); err != nil {
		return err
	}
	if err := c.Check(ctx); err != nil {
		return err
	}
	key := c.key(filesDir, name)
	r, info, err := c.openObject(ctx, key)
	if err != nil {
		return err
	}
	defer r.Close()
	total, _ := strconv.ParseInt(metaGet(info.UserMetadata, metaSize), 10, 64)
	want := wantSHA256
	if want == "" {
		want = metaGet(info.UserMetadata, metaSHA256)
	}

	tmp, err := c.createDownload(localPath)
	if err != nil {
		return fmt.Errorf("upload: get file %s: %w", name, err)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			c.fs.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	pw := &progressWriter{w: io.MultiWriter(tmp, h), c: c, name: name, total: total, every: c.chunkSize}
	var w io.Writer = pw
	if wantSize >= 0 {
		w = &cappedWriter{w: pw, left: wantSize}
	}
	c.progress("download", name, 0, total)
	if metaGet(info.UserMetadata, metaLayout) == layoutChunked {
		err = c.getChunked(ctx, r, key, w)
	} else {
		_, err = io.Copy(w, r)
	}
	if errors.Is(err, errTooLarge) {
		return c.corrupt(key, fmt.Errorf("plaintext larger than the %d bytes its manifest records", wantSize))
	}
	if err != nil {
		var oe *ObjectError
		if errors.As(err, &oe) {
			return err // names the object already
		}
		return fmt.Errorf("upload: get file %s into %s: %w", name, localPath, err)
	}
	if wantSize >= 0 && pw.n != wantSize {
		return c.corrupt(key, fmt.Errorf("plaintext of %d bytes, its manifest records %d", pw.n, wantSize))
	}
	got := hex.EncodeToString(h.Sum(nil))
	if want != "" && got != want {
		return c.corrupt(key, fmt.Errorf("plaintext SHA-256 %s, want %s", got, want))
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("upload: get file %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("upload: get file %s: %w", name, err)
	}
	// Synced before the rename, so the name never shows contents a power
	// cut could take back; the directory synced after it, so the name
	// survives one once GetFile returns.
	if err := c.fs.Rename(tmp.Name(), localPath); err != nil {
		return fmt.Errorf("upload: get file %s: %w", name, err)
	}
	committed = true
	if err := c.fs.SyncDir(filepath.Dir(localPath)); err != nil {
		return fmt.Errorf("upload: get file %s: %w", name, err)
	}
	c.progress("download", name, pw.n, pw.n)
	c.log.Debug("upload: got file", "name", name, "bytes", pw.n)
	return nil
}

// errTooLarge is cappedWriter's refusal.
var errTooLarge = errors.New("upload: more bytes than expected")

// cappedWriter passes at most left bytes to w and fails on the first byte
// beyond, without writing any of that write.
type cappedWriter struct {
	w    io.Writer
	left int64
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		return 0, errTooLarge
	}
	n, err := c.w.Write(p)
	c.left -= int64(n)
	return n, err
}

// progressWriter reports progress every `every` bytes written.
type progressWriter struct {
	w        io.Writer
	c        *Client
	name     string
	n, total int64
	every    int64
	lastTick int64
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	if p.n-p.lastTick >= p.every {
		p.lastTick = p.n
		p.c.progress("download", p.name, p.n, p.total)
	}
	return n, err
}

// downloadMark is in the name of GetFile's temporary files: the local name
// with it and a random suffix.
const downloadMark = ".download-"

// createDownload creates a new temporary file beside localPath for
// GetFile to download into.
func (c *Client) createDownload(localPath string) (vfs.File, error) {
	for {
		name := localPath + downloadMark + strconv.FormatUint(rand.Uint64(), 36)
		f, err := c.fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
}

// IsDownloadTemp reports whether name (a base name) is a temporary file of
// GetFile: one a crash or power cut during a download leaves behind, which
// whoever owns the directory removes when it starts again.
func IsDownloadTemp(name string) bool { return strings.Contains(name, downloadMark) }
