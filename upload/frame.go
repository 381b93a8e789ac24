package upload

// Object framing. Every object the package uploads (file, chunk, chunk index,
// manifest) is stored in one self-describing format:
//
//	offset size
//	0      4    magic "EDDY"
//	4      1    format version, 2 (the only one read)
//	5      1    compression: 1 = zstd (one frame, content checksum on)
//	6      1    encryption: 0 = none, 1 = AES-256-GCM segments
//	7      1    reserved, 0
//	-- only when encryption is 1:
//	8      8    key id: HMAC-SHA256(K_id, "eddy upload key id")[:8]
//	16     32   salt, random per object
//	-- then the payload: the zstd frame of the plaintext, either as is
//	   (encryption 0) or cut into 64 KiB segments, each sealed with
//	   AES-256-GCM under the object's own key (encryption 1):
//	       K_obj     = HKDF-SHA256(K_enc, salt, "eddy upload v2 object key")
//	       segment i = Seal(K_obj,
//	                        nonce = 0(7) | i as uint32 big-endian | last(1),
//	                        plaintext = up to 64 KiB of the zstd frame,
//	                        additional data = header | object key)
//
// K_enc and K_id are separate subkeys of the configured key, derived with
// HKDF-SHA256 (no salt; info "eddy upload v2 aes-256-gcm" and "eddy upload v2
// key id"), so the key id reveals nothing usable about the encryption key. A
// fresh 256-bit salt makes every object's key different, so the per-segment
// nonces (a counter) never repeat under one key, however many objects a
// device writes. Every segment but the last holds exactly 64 KiB of
// plaintext and is sealed with last = 0; the last holds 0..64 KiB and is
// sealed with last = 1, so a truncated, reordered or extended object fails
// authentication. The additional data binds the header (format version and
// salt included) and the object's full key in the bucket (prefix and name,
// e.g. "gw-1/manifests/7.json"): an object copied to another name or to
// another device's prefix does not open.
//
// Until the first tagged release a change to the format raises its version
// and drops the reading of the previous one; an object of another version
// is refused as corrupt, saying the version found and the one read.
//
// Without encryption, zstd's content checksum catches accidental damage, and
// GetFile's SHA-256 check catches any change to a file; only encryption
// protects manifests against deliberate tampering.

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
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
	frameVersion     = 2
	compressionZstd  = 1
	encryptionNone   = 0
	encryptionAESGCM = 1

	plainHeaderSize  = 8
	sealedHeaderSize = 48
	saltSize         = 32
	// segmentSize is the plaintext size of every encrypted segment but the
	// last: large enough that the 16-byte tag costs 0.02%, small enough that
	// a reader holds little memory.
	segmentSize = 64 << 10
	tagSize     = 16
	noncePrefix = 7

	infoEncryption = "eddy upload v2 aes-256-gcm"
	infoKeyID      = "eddy upload v2 key id"
	infoObjectKey  = "eddy upload v2 object key"
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
	encKey []byte // K_enc; nil: encryption off
	keyID  [8]byte
	// salts is where the salt of every encrypted object comes from;
	// nil is crypto/rand (tests fix it to write a reproducible object).
	salts io.Reader

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
		var err error
		if cd.encKey, cd.keyID, err = deriveKeys(key); err != nil {
			return nil, err
		}
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

// deriveKeys returns the encryption subkey K_enc and the key id of key
// (see the format).
func deriveKeys(key []byte) (encKey []byte, id [8]byte, err error) {
	encKey, err = hkdf.Key(sha256.New, key, nil, infoEncryption, 32)
	if err != nil {
		return nil, id, fmt.Errorf("upload: encryption key: %w", err)
	}
	idKey, err := hkdf.Key(sha256.New, key, nil, infoKeyID, 32)
	if err != nil {
		return nil, id, fmt.Errorf("upload: encryption key: %w", err)
	}
	m := hmac.New(sha256.New, idKey)
	m.Write([]byte("eddy upload key id"))
	copy(id[:], m.Sum(nil))
	return encKey, id, nil
}

// objectKey returns K_obj, the key of the object with salt.
func (cd *codec) objectKey(salt []byte) ([]byte, error) {
	k, err := hkdf.Key(sha256.New, cd.encKey, salt, infoObjectKey, 32)
	if err != nil {
		return nil, fmt.Errorf("upload: object key: %w", err)
	}
	return k, nil
}

// objectAEAD returns the AEAD of the object with salt.
func (cd *codec) objectAEAD(salt []byte) (cipher.AEAD, error) {
	k, err := cd.objectKey(salt)
	if err != nil {
		return nil, err
	}
	return newGCM(k)
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("upload: encryption key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("upload: encryption key: %w", err)
	}
	return aead, nil
}

func (cd *codec) encrypting() bool { return cd.encKey != nil }

func (cd *codec) encryption() string {
	if !cd.encrypting() {
		return "none"
	}
	return "aes-256-gcm"
}

func (cd *codec) keyIDHex() string {
	if !cd.encrypting() {
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

// encode writes the framed form of everything read from src to dst. key is
// the object's full key in the bucket; it is authenticated when encrypting.
// It returns the plaintext's size and SHA-256.
func (cd *codec) encode(dst io.Writer, src io.Reader, key string) (plainSize int64, sum [32]byte, err error) {
	bufs := cd.buffers.Get().(*segmentBuffers)
	defer cd.buffers.Put(bufs)

	h := bufs.header[:plainHeaderSize]
	copy(h, frameMagic)
	h[4], h[5], h[6], h[7] = frameVersion, compressionZstd, encryptionNone, 0
	var out io.Writer = dst
	var sw *segmentWriter
	if cd.encrypting() {
		h = bufs.header[:sealedHeaderSize]
		h[6] = encryptionAESGCM
		copy(h[8:16], cd.keyID[:])
		salts := cd.salts
		if salts == nil {
			salts = rand.Reader
		}
		if _, err := io.ReadFull(salts, h[16:16+saltSize]); err != nil {
			return 0, sum, fmt.Errorf("upload: salt: %w", err)
		}
		aead, err := cd.objectAEAD(h[16 : 16+saltSize])
		if err != nil {
			return 0, sum, err
		}
		bufs.aad = append(append(bufs.aad[:0], h...), key...)
		sw = &segmentWriter{dst: dst, aead: aead, aad: bufs.aad, plain: bufs.plain[:0], sealed: bufs.sealed}
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
// src. key must be the object's full key in the bucket. Errors from reading
// or closing it wrap errFrame (corrupt payload), ErrWrongKey, or a
// *transportError (src failed). Close returns pooled buffers; it does not
// close src. The reader must not be used after Close.
func (cd *codec) decode(src io.Reader, key string) (io.ReadCloser, error) {
	src = transportReader{src}
	bufs := cd.buffers.Get().(*segmentBuffers)
	payload, err := cd.openPayload(src, bufs, key)
	if err != nil {
		cd.buffers.Put(bufs)
		return nil, err
	}
	dec, err := cd.decoder(payload)
	if err != nil {
		cd.buffers.Put(bufs)
		return nil, err
	}
	return &decodeReader{cd: cd, bufs: bufs, dec: dec}, nil
}

// openPayload reads the header from src and returns the reader of the zstd
// frame that follows: src itself, or the opened segments.
func (cd *codec) openPayload(src io.Reader, bufs *segmentBuffers, key string) (io.Reader, error) {
	h := bufs.header[:plainHeaderSize]
	if _, err := io.ReadFull(src, h); err != nil {
		return nil, headerErr(err)
	}
	if string(h[:4]) != frameMagic {
		return nil, fmt.Errorf("%w: magic %q, want %q", errFrame, h[:4], frameMagic)
	}
	if v := h[4]; v != frameVersion {
		by := "a development build before the first release"
		if v > frameVersion {
			by = "a newer Eddy"
		}
		return nil, fmt.Errorf("%w: format version %d, this build reads version %d only (written by %s)", errFrame, v, frameVersion, by)
	}
	if h[5] != compressionZstd {
		return nil, fmt.Errorf("%w: unsupported compression %d", errFrame, h[5])
	}
	switch h[6] {
	case encryptionNone:
		if cd.encrypting() {
			return nil, fmt.Errorf("%w: object is not encrypted but an encryption key is configured", errFrame)
		}
		return src, nil
	case encryptionAESGCM:
	default:
		return nil, fmt.Errorf("%w: unsupported encryption %d", errFrame, h[6])
	}
	h = bufs.header[:sealedHeaderSize]
	if _, err := io.ReadFull(src, h[plainHeaderSize:]); err != nil {
		return nil, headerErr(err)
	}
	if !cd.encrypting() {
		return nil, fmt.Errorf("%w: object is encrypted (key id %x) and no encryption key is configured", ErrWrongKey, h[8:16])
	}
	if !hmac.Equal(h[8:16], cd.keyID[:]) {
		return nil, fmt.Errorf("%w: object key id %x, configured key id %x", ErrWrongKey, h[8:16], cd.keyID[:])
	}
	aead, err := cd.objectAEAD(h[16 : 16+saltSize])
	if err != nil {
		return nil, err
	}
	sr := &segmentReader{src: src, buf: bufs.sealed[:cap(bufs.sealed)], plainBuf: bufs.plain, aead: aead}
	bufs.aad = append(append(bufs.aad[:0], h...), key...)
	sr.aad = bufs.aad
	return sr, nil
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
