package upload

import (
	"bytes"
	"context"
	"errors"
	"io"
)

// partSize bounds the pooled object buffers. A file object is at most a
// chunk (8 MiB) plus framing, so it goes in one PUT; larger files use the
// chunked layout (chunked.go). Only a manifest can be larger, and minio-go
// sends a body above its 16 MiB part size as a multipart upload.
const partSize = 16 << 20

// encodeObject frames src as object key into a pooled buffer. The caller
// returns the buffer with c.putBuf.
func (c *Client) encodeObject(src io.Reader, key string) (*bytes.Buffer, int64, [32]byte, error) {
	buf := c.getBuf()
	n, sum, err := c.codec.encode(buf, src, key)
	if err != nil {
		c.putBuf(buf)
		return nil, 0, sum, err
	}
	return buf, n, sum, nil
}

func (c *Client) getBuf() *bytes.Buffer {
	if b, ok := c.outBufs.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

func (c *Client) putBuf(b *bytes.Buffer) {
	// Do not pool buffers grown by an unusually large manifest.
	if b.Cap() <= 2*partSize {
		c.outBufs.Put(b)
	}
}

// putObject uploads body as object key with metadata meta, paced by the
// bandwidth limit. The bytes sent, retries included, count as uploaded.
func (c *Client) putObject(ctx context.Context, key string, body []byte, meta map[string]string) error {
	r := bytes.NewReader(body)
	paced := &seekablePacedReader{pacedReader: pacedReader{ctx: ctx, r: r, l: c.up, count: &c.bytesUp}, s: r}
	if err := c.s3.putObject(ctx, key, paced, int64(len(body)), meta); err != nil {
		return c.classify("put", key, err)
	}
	c.objectsPut.Add(1)
	return nil
}

// stat returns the object's info, or an error wrapping ErrNotFound when it
// does not exist.
func (c *Client) stat(ctx context.Context, key string) (objectInfo, error) {
	info, err := c.s3.headObject(ctx, key)
	if err != nil {
		return info, c.classify("stat", key, err)
	}
	return info, nil
}

// openObject starts reading object key and returns its plaintext and
// metadata. Reading errors are already
// classified: ErrCorrupt or ErrWrongKey naming the object, or a transport
// error. The caller closes the returned reader.
func (c *Client) openObject(ctx context.Context, key string) (io.ReadCloser, objectInfo, error) {
	body, info, err := c.s3.getObject(ctx, key)
	if err != nil {
		return nil, info, c.classify("get", key, err)
	}
	c.objectsGot.Add(1)
	paced := &pacedReader{ctx: ctx, r: body, l: c.down, count: &c.bytesDown}
	plain, err := c.codec.decode(paced, key)
	if err != nil {
		body.Close()
		return nil, info, c.readErr(key, err)
	}
	return &objectReader{c: c, key: key, plain: plain, body: body}, info, nil
}

// readErr classifies an error from decoding object key.
func (c *Client) readErr(key string, err error) error {
	var te *transportError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		return c.classify("read", key, te.err)
	case errors.Is(err, ErrWrongKey):
		return &ObjectError{Op: "get", Object: c.object(key), Err: err}
	default:
		return c.corrupt(key, err)
	}
}

// objectReader is the plaintext of one object; its errors name the object.
type objectReader struct {
	c     *Client
	key   string
	plain io.ReadCloser
	body  io.ReadCloser
}

func (r *objectReader) Read(p []byte) (int, error) {
	n, err := r.plain.Read(p)
	if err != nil && err != io.EOF {
		err = r.c.readErr(r.key, err)
	}
	return n, err
}

func (r *objectReader) Close() error {
	r.plain.Close()
	return r.body.Close()
}
