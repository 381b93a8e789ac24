package upload

// Object framing. Every object the package uploads (file, chunk, chunk index,
// manifest) is stored in one self-describing format, so an object copied to
// another bucket or prefix still says how to read it:
//
//	offset size
//	0      4    magic "EDDY"
//	4      1    format version, 1
//	5      1    compression: 1 = zstd (one frame, content checksum on)
//	6      1    encryption: 0 = none, 1 = AES-256-GCM segments
//	7      1    reserved, 0
//	-- only when encryption is 1:
//	8      8    key id: HMAC-SHA256(key, "eddy upload key id v1")[:8]
//	16     7    nonce prefix, random per object
//	23     1    reserved, 0
//	-- then the payload: the zstd frame of the plaintext, either as is
//	   (encryption 0) or cut into 64 KiB segments, each sealed with
//	   AES-256-GCM (encryption 1):
//	       segment i = Seal(nonce = prefix(7) | i as uint32 big-endian | last(1),
//	                        plaintext = up to 64 KiB of the zstd frame,
//	                        additional data = header | object name)
//	   Every segment but the last holds exactly 64 KiB of plaintext and is
//	   sealed with last = 0; the last holds 0..64 KiB and is sealed with
//	   last = 1, so a truncated, reordered or extended object fails
//	   authentication. The object name (the key below the prefix, e.g.
//	   "files/<sha>.snap") is authenticated, so objects cannot be swapped.
//
// Without encryption, zstd's content checksum catches accidental damage, and
// GetFile's SHA-256 check catches any change to a file; only encryption
// protects manifests against deliberate tampering.

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"sync"

	"github.com/klauspost/compress/zstd"
)

const (
	frameMagic       = "EDDY"
	frameVersion     = 1
	compressionZstd  = 1
	encryptionNone   = 0
	encryptionAESGCM = 1

	plainHeaderSize  = 8
	sealedHeaderSize = 24
	// segmentSize is the plaintext size of every encrypted segment but the
	// last: large enough that the 16-byte tag costs 0.02%, small enough that
	// a reader holds little memory.
	segmentSize = 64 << 10
	tagSize     = 16
	noncePrefix = 7

	// zstdWindow bounds the encoder's and decoder's memory; checkpoint
	// files compress well within a 1 MiB window.
	zstdWindow = 1 << 20
)

// errFrame marks a framing or authentication failure of the payload (not of
// the transport): the caller reports it as ErrCorrupt with the object name.
var errFrame = errors.New("bad frame")

// transportError marks an error of the stream an object is read from, which
// is not evidence of corruption.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

type transportReader struct{ r io.Reader }

func (t transportReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		err = &transportError{err}
	}
	return n, err
}

// codec encodes and decodes framed objects. It is safe for concurrent use;
// encoders, decoders and segment buffers are pooled so steady-state transfers
// do not allocate per object beyond the pools' warm-up.
type codec struct {
	aead  cipher.AEAD // nil: encryption off
	keyID [8]byte

	encoders sync.Pool // *zstd.Encoder
	decoders sync.Pool // *zstd.Decoder
	buffers  sync.Pool // *segmentBuffers
}

type segmentBuffers struct {
	plain  []byte // cap segmentSize
	sealed []byte // cap segmentSize + tagSize + 1
	aad    []byte
	header [sealedHeaderSize]byte
	sum    hash.Hash
	copy   []byte // cap 32 KiB, for io.CopyBuffer
}

// newCodec returns a codec that encrypts with key (32 bytes) or, when key is
// empty, does not encrypt.
func newCodec(key []byte) (*codec, error) {
	cd := &codec{}
	if len(key) > 0 {
		if len(key) != 32 {
			return nil, fmt.Errorf("upload: encryption key is %d bytes, want 32 (AES-256)", len(key))
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("upload: encryption key: %w", err)
		}
		if cd.aead, err = cipher.NewGCM(block); err != nil {
			return nil, fmt.Errorf("upload: encryption key: %w", err)
		}
		cd.keyID = keyID(key)
	}
	cd.buffers.New = func() any {
		return &segmentBuffers{
			plain:  make([]byte, 0, segmentSize),
			sealed: make([]byte, 0, segmentSize+tagSize+1),
			sum:    sha256.New(),
			copy:   make([]byte, 32<<10),
		}
	}
	return cd, nil
}

func keyID(key []byte) [8]byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("eddy upload key id v1"))
	var id [8]byte
	copy(id[:], m.Sum(nil))
	return id
}

func (cd *codec) encryption() string {
	if cd.aead == nil {
		return "none"
	}
	return "aes-256-gcm"
}

func (cd *codec) keyIDHex() string {
	if cd.aead == nil {
		return ""
	}
	return fmt.Sprintf("%x", cd.keyID[:])
}

func (cd *codec) encoder(w io.Writer) (*zstd.Encoder, error) {
	if e, ok := cd.encoders.Get().(*zstd.Encoder); ok {
		e.Reset(w)
		return e, nil
	}
	e, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(zstdWindow),
		zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(true))
	if err != nil {
		return nil, fmt.Errorf("upload: zstd encoder: %w", err)
	}
	return e, nil
}

func (cd *codec) decoder(r io.Reader) (*zstd.Decoder, error) {
	if d, ok := cd.decoders.Get().(*zstd.Decoder); ok {
		if err := d.Reset(r); err != nil {
			return nil, fmt.Errorf("upload: zstd decoder: %w", err)
		}
		return d, nil
	}
	d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(8<<20))
	if err != nil {
		return nil, fmt.Errorf("upload: zstd decoder: %w", err)
	}
	return d, nil
}

// encode writes the framed form of everything read from src to dst. name is
// the object's key below the prefix; it is authenticated when encrypting. It
// returns the plaintext's size and SHA-256.
func (cd *codec) encode(dst io.Writer, src io.Reader, name string) (plainSize int64, sum [32]byte, err error) {
	bufs := cd.buffers.Get().(*segmentBuffers)
	defer cd.buffers.Put(bufs)

	h := bufs.header[:plainHeaderSize]
	copy(h, frameMagic)
	h[4], h[5], h[6], h[7] = frameVersion, compressionZstd, encryptionNone, 0
	var out io.Writer = dst
	var sw *segmentWriter
	if cd.aead != nil {
		h = bufs.header[:sealedHeaderSize]
		h[6] = encryptionAESGCM
		copy(h[8:16], cd.keyID[:])
		if _, err := rand.Read(h[16 : 16+noncePrefix]); err != nil {
			return 0, sum, fmt.Errorf("upload: nonce: %w", err)
		}
		h[23] = 0
		bufs.aad = append(append(bufs.aad[:0], h...), name...)
		sw = &segmentWriter{dst: dst, aead: cd.aead, aad: bufs.aad, plain: bufs.plain[:0], sealed: bufs.sealed}
		copy(sw.nonce[:noncePrefix], h[16:16+noncePrefix])
		out = sw
	}
	if _, err := dst.Write(h); err != nil {
		return 0, sum, fmt.Errorf("upload: write header: %w", err)
	}

	enc, err := cd.encoder(out)
	if err != nil {
		return 0, sum, err
	}
	bufs.sum.Reset()
	n, err := io.CopyBuffer(enc, io.TeeReader(src, bufs.sum), bufs.copy)
	if err != nil {
		enc.Reset(nil)
		cd.encoders.Put(enc)
		return 0, sum, fmt.Errorf("upload: compress: %w", err)
	}
	if err := enc.Close(); err != nil {
		return 0, sum, fmt.Errorf("upload: compress: %w", err)
	}
	enc.Reset(nil)
	cd.encoders.Put(enc)
	if sw != nil {
		if err := sw.seal(true); err != nil {
			return 0, sum, err
		}
	}
	bufs.sum.Sum(sum[:0])
	return n, sum, nil
}

// decode returns a reader of the plaintext of the framed object read from
// src. name must be the name the object was encoded with. Errors from reading
// or closing it wrap errFrame (corrupt payload), ErrWrongKey, or a
// *transportError (src failed). Close returns pooled buffers; it does not
// close src. The reader must not be used after Close.
func (cd *codec) decode(src io.Reader, name string) (io.ReadCloser, error) {
	src = transportReader{src}
	bufs := cd.buffers.Get().(*segmentBuffers)
	h := bufs.header[:plainHeaderSize]
	if _, err := io.ReadFull(src, h); err != nil {
		cd.buffers.Put(bufs)
		return nil, headerErr(err)
	}
	if string(h[:4]) != frameMagic {
		cd.buffers.Put(bufs)
		return nil, fmt.Errorf("%w: magic %q, want %q", errFrame, h[:4], frameMagic)
	}
	if h[4] != frameVersion || h[5] != compressionZstd {
		cd.buffers.Put(bufs)
		return nil, fmt.Errorf("%w: unsupported version %d or compression %d", errFrame, h[4], h[5])
	}
	d := &decodeReader{cd: cd, bufs: bufs}
	var payload io.Reader = src
	switch h[6] {
	case encryptionNone:
		if cd.aead != nil {
			cd.buffers.Put(bufs)
			return nil, fmt.Errorf("%w: object is not encrypted but an encryption key is configured", errFrame)
		}
	case encryptionAESGCM:
		h = bufs.header[:sealedHeaderSize]
		if _, err := io.ReadFull(src, h[plainHeaderSize:]); err != nil {
			cd.buffers.Put(bufs)
			return nil, headerErr(err)
		}
		if cd.aead == nil {
			cd.buffers.Put(bufs)
			return nil, fmt.Errorf("%w: object is encrypted (key id %x) and no encryption key is configured", ErrWrongKey, h[8:16])
		}
		if !hmac.Equal(h[8:16], cd.keyID[:]) {
			cd.buffers.Put(bufs)
			return nil, fmt.Errorf("%w: object key id %x, configured key id %x", ErrWrongKey, h[8:16], cd.keyID[:])
		}
		bufs.aad = append(append(bufs.aad[:0], h...), name...)
		sr := &segmentReader{src: src, aead: cd.aead, aad: bufs.aad, buf: bufs.sealed[:cap(bufs.sealed)], plainBuf: bufs.plain}
		copy(sr.nonce[:noncePrefix], h[16:16+noncePrefix])
		payload = sr
	default:
		cd.buffers.Put(bufs)
		return nil, fmt.Errorf("%w: unsupported encryption %d", errFrame, h[6])
	}
	dec, err := cd.decoder(payload)
	if err != nil {
		cd.buffers.Put(bufs)
		return nil, err
	}
	d.dec = dec
	return d, nil
}

func headerErr(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: truncated header", errFrame)
	}
	return err
}

// decodeReader is the plaintext side of decode.
type decodeReader struct {
	cd   *codec
	bufs *segmentBuffers
	dec  *zstd.Decoder
}

func (d *decodeReader) Read(p []byte) (int, error) {
	if d.dec == nil {
		return 0, errors.New("upload: read after close")
	}
	n, err := d.dec.Read(p)
	if err == nil || err == io.EOF {
		return n, err
	}
	var te *transportError
	if errors.As(err, &te) || errors.Is(err, errFrame) {
		return n, err
	}
	// Anything else is zstd rejecting the stream: corrupt.
	return n, fmt.Errorf("%w: zstd: %w", errFrame, err)
}

func (d *decodeReader) Close() error {
	if d.dec == nil {
		return nil
	}
	_ = d.dec.Reset(nil)
	d.cd.decoders.Put(d.dec)
	d.cd.buffers.Put(d.bufs)
	d.dec, d.bufs = nil, nil
	return nil
}

// segmentWriter seals what is written to it in segments (see the format).
type segmentWriter struct {
	dst     io.Writer
	aead    cipher.AEAD
	nonce   [12]byte
	counter uint32
	aad     []byte
	plain   []byte
	sealed  []byte
}

func (w *segmentWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		// Seal a full segment only once more data follows: the last
		// segment must be sealed with last = 1.
		if len(w.plain) == segmentSize {
			if err := w.seal(false); err != nil {
				return n, err
			}
		}
		k := copy(w.plain[len(w.plain):segmentSize], p)
		w.plain = w.plain[:len(w.plain)+k]
		p = p[k:]
		n += k
	}
	return n, nil
}

func (w *segmentWriter) seal(last bool) error {
	if w.counter == math.MaxUint32 {
		return errors.New("upload: object too large for the segment counter")
	}
	binary.BigEndian.PutUint32(w.nonce[noncePrefix:], w.counter)
	w.nonce[11] = 0
	if last {
		w.nonce[11] = 1
	}
	out := w.aead.Seal(w.sealed[:0], w.nonce[:], w.plain, w.aad)
	if _, err := w.dst.Write(out); err != nil {
		return fmt.Errorf("upload: write segment %d: %w", w.counter, err)
	}
	w.counter++
	w.plain = w.plain[:0]
	return nil
}

// segmentReader opens the segments read from src.
type segmentReader struct {
	src      io.Reader
	aead     cipher.AEAD
	nonce    [12]byte
	counter  uint32
	aad      []byte
	buf      []byte // segmentSize + tagSize + 1: one sealed segment and one byte of lookahead
	have     int    // bytes of buf already filled (the lookahead byte)
	plainBuf []byte
	plain    []byte // opened, not yet returned: plain[off:]
	off      int
	done     bool
}

func (r *segmentReader) Read(p []byte) (int, error) {
	for r.off == len(r.plain) {
		if r.done {
			return 0, io.EOF
		}
		if err := r.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.plain[r.off:])
	r.off += n
	return n, nil
}

func (r *segmentReader) next() error {
	full := len(r.buf)
	n, err := io.ReadFull(r.src, r.buf[r.have:])
	n += r.have
	last, seg := false, n
	switch {
	case err == nil:
		seg = full - 1 // the last byte belongs to the next segment
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		last = true
	default:
		return err
	}
	if seg < tagSize {
		return fmt.Errorf("%w: segment %d truncated", errFrame, r.counter)
	}
	binary.BigEndian.PutUint32(r.nonce[noncePrefix:], r.counter)
	r.nonce[11] = 0
	if last {
		r.nonce[11] = 1
	}
	plain, err := r.aead.Open(r.plainBuf[:0], r.nonce[:], r.buf[:seg], r.aad)
	if err != nil {
		return fmt.Errorf("%w: segment %d fails authentication", errFrame, r.counter)
	}
	if last {
		r.done = true
	} else {
		r.buf[0] = r.buf[full-1]
		r.have = 1
	}
	r.counter++
	r.plain, r.off = plain, 0
	return nil
}
