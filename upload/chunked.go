package upload

// Chunked layout of large files. A file larger than LargeFileSize is stored
// as chunk objects <key>.part-0, <key>.part-1, … of ChunkSize plaintext bytes
// each (the last may be shorter), each framed on its own, and an index object
// at <key> itself, written last:
//
//	{"version":1,"size":N,"sha256":"<whole file>","chunk_size":8388608,
//	 "chunks":[{"size":8388608,"sha256":"<chunk>"}, …]}
//
// Why not S3 multipart: a multipart upload cannot be resumed after the
// process restarts unless its upload id and part list are kept somewhere,
// and its parts are not independently verifiable. Chunk objects are: PutFile
// computes each chunk's SHA-256 from the local file and skips a chunk whose
// object already exists with that SHA-256 in its metadata, so an upload
// interrupted by a reboot or a dropped uplink resumes at the first missing
// chunk. Since the index goes last, <key> exists only when every chunk does,
// and PutFile's "already uploaded" check on <key> stays exact. Each PUT is at
// most one chunk, so memory stays at about two chunks per transfer.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

const (
	// ChunkSize is the plaintext size of a chunk object.
	ChunkSize = 8 << 20
	// LargeFileSize is the size above which a file is chunked.
	LargeFileSize = 16 << 20

	layoutChunk   = "chunk"
	maxIndexBytes = 16 << 20
	// chunkIndexVersion is the index format written, and the only one read.
	chunkIndexVersion = 1
)

type chunkIndex struct {
	Version   int          `json:"version"`
	Size      int64        `json:"size"`
	SHA256    string       `json:"sha256"`
	ChunkSize int64        `json:"chunk_size"`
	Chunks    []chunkEntry `json:"chunks"`
}

type chunkEntry struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

func partSuffixOf(i int) string { return ".part-" + strconv.Itoa(i) }

func (c *Client) chunkBuf() *[]byte {
	if b, ok := c.chunkBufs.Get().(*[]byte); ok && int64(cap(*b)) >= c.chunkSize {
		return b
	}
	b := make([]byte, c.chunkSize)
	return &b
}

func (c *Client) putChunked(ctx context.Context, file io.Reader, f FileRef, size int64, key string) error {
	bufp := c.chunkBuf()
	defer c.chunkBufs.Put(bufp)
	whole := sha256.New()
	idx := chunkIndex{Version: chunkIndexVersion, Size: size, ChunkSize: c.chunkSize}
	var done int64
	for i := 0; done < size; i++ {
		n := min(c.chunkSize, size-done)
		chunk := (*bufp)[:n]
		if _, err := io.ReadFull(file, chunk); err != nil {
			return fmt.Errorf("upload: put file %s: %w: %s changed while read: %w", f.Name, ErrLocalMismatch, f.LocalPath, err)
		}
		whole.Write(chunk)
		sum := sha256.Sum256(chunk)
		hexSum := hex.EncodeToString(sum[:])
		idx.Chunks = append(idx.Chunks, chunkEntry{Size: n, SHA256: hexSum})
		if err := c.putChunk(ctx, key+partSuffixOf(i), chunk, hexSum); err != nil {
			return err
		}
		done += n
		c.progress("upload", f.Name, done, size)
	}
	idx.SHA256 = hex.EncodeToString(whole.Sum(nil))
	if f.SHA256 != "" && idx.SHA256 != f.SHA256 {
		return fmt.Errorf("upload: put file %s: %w: %s has SHA-256 %s, want %s", f.Name, ErrLocalMismatch, f.LocalPath, idx.SHA256, f.SHA256)
	}
	data, err := json.Marshal(idx)
	if err != nil {
		return fmt.Errorf("upload: put file %s: index: %w", f.Name, err)
	}
	buf, _, _, err := c.encodeObject(bytes.NewReader(data), key)
	if err != nil {
		return fmt.Errorf("upload: put file %s: %w", f.Name, err)
	}
	defer c.putBuf(buf)
	return c.putObject(ctx, key, buf.Bytes(), c.metadata(layoutChunked, size, idx.SHA256))
}

// putChunk uploads one chunk unless an object with its SHA-256 is there.
func (c *Client) putChunk(ctx context.Context, key string, chunk []byte, hexSum string) error {
	info, err := c.stat(ctx, key)
	if err == nil && c.sameForm(info.UserMetadata, int64(len(chunk)), hexSum) {
		c.objectsSkipped.Add(1)
		return nil
	}
	if err != nil && !isNotFound(err) {
		return err
	}
	buf, _, _, err := c.encodeObject(bytes.NewReader(chunk), key)
	if err != nil {
		return fmt.Errorf("upload: put %s: %w", key, err)
	}
	defer c.putBuf(buf)
	return c.putObject(ctx, key, buf.Bytes(), c.metadata(layoutChunk, int64(len(chunk)), hexSum))
}

// getChunked reads the index from r (the plaintext of object key) and writes
// the chunks, each verified against the index, to w.
func (c *Client) getChunked(ctx context.Context, r io.Reader, key string, w io.Writer) error {
	data, err := io.ReadAll(io.LimitReader(r, maxIndexBytes+1))
	if err != nil {
		return err
	}
	var idx chunkIndex
	if len(data) > maxIndexBytes {
		return c.corrupt(key, fmt.Errorf("chunk index larger than %d bytes", maxIndexBytes))
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		return c.corrupt(key, fmt.Errorf("chunk index: %w", err))
	}
	if idx.Version != chunkIndexVersion {
		return c.corrupt(key, fmt.Errorf("chunk index format version %d, this build reads version %d only", idx.Version, chunkIndexVersion))
	}
	var sum int64
	for _, ch := range idx.Chunks {
		sum += ch.Size
	}
	if sum != idx.Size {
		return c.corrupt(key, fmt.Errorf("chunk index: chunks sum to %d bytes, size %d", sum, idx.Size))
	}
	h := sha256.New()
	for i, ch := range idx.Chunks {
		pk := key + partSuffixOf(i)
		pr, _, err := c.openObject(ctx, pk)
		if err != nil {
			return err
		}
		h.Reset()
		n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(pr, ch.Size+1))
		pr.Close()
		if err != nil {
			return err
		}
		if got := hex.EncodeToString(h.Sum(nil)); n != ch.Size || got != ch.SHA256 {
			return c.corrupt(pk, fmt.Errorf("chunk %d: %d bytes with SHA-256 %s, index says %d bytes with %s", i, n, got, ch.Size, ch.SHA256))
		}
	}
	return nil
}
