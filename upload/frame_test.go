package upload

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"testing"
)

func mustCodec(t testing.TB, key []byte) *codec {
	t.Helper()
	cd, err := newCodec(key)
	if err != nil {
		t.Fatal(err)
	}
	return cd
}

func encodeBytes(t testing.TB, cd *codec, data []byte, name string) []byte {
	t.Helper()
	var b bytes.Buffer
	n, _, err := cd.encode(&b, bytes.NewReader(data), name)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("encode: %d bytes, %v", n, err)
	}
	return b.Bytes()
}

func decodeBytes(cd *codec, obj []byte, key string) ([]byte, error) {
	r, err := cd.decode(bytes.NewReader(obj), key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func TestCodec_RoundTrip(t *testing.T) {
	key := bytes.Repeat([]byte{42}, 32)
	sizes := []int{0, 1, segmentSize - 1, segmentSize, segmentSize + 1, 3*segmentSize + 17}
	for _, k := range [][]byte{nil, key} {
		cd := mustCodec(t, k)
		for _, n := range sizes {
			// Random data makes the zstd frame about as long as the
			// input, so segment boundaries are exercised.
			data := randomBytes(t, n)
			got, err := decodeBytes(cd, encodeBytes(t, cd, data, "files/x"), "files/x")
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("key=%v size %d: %v", k != nil, n, err)
			}
		}
	}
}

func TestCodec_Rejects(t *testing.T) {
	key := bytes.Repeat([]byte{42}, 32)
	enc := mustCodec(t, key)
	plain := mustCodec(t, nil)
	data := randomBytes(t, 3*segmentSize+5)
	sealed := encodeBytes(t, enc, data, "files/x")
	unsealed := encodeBytes(t, plain, data, "files/x")
	flip := func(b []byte, i int) []byte { c := bytes.Clone(b); c[i] ^= 1; return c }
	cases := []struct {
		name string
		cd   *codec
		obj  []byte
		as   string
		want error
	}{
		{"flipped payload", enc, flip(sealed, len(sealed)/2), "files/x", errFrame},
		{"flipped header", enc, flip(sealed, 20), "files/x", errFrame},
		{"flipped key id", enc, flip(sealed, 9), "files/x", ErrWrongKey},
		{"truncated at segment boundary", enc, sealed[:sealedHeaderSize+2*(segmentSize+tagSize)], "files/x", errFrame},
		{"truncated mid segment", enc, sealed[:len(sealed)-3], "files/x", errFrame},
		{"extended", enc, append(bytes.Clone(sealed), 0), "files/x", errFrame},
		{"other name", enc, sealed, "files/y", errFrame},
		{"version byte changed", enc, flip(sealed, 4), "files/x", errFrame},
		{"wrong key", mustCodec(t, bytes.Repeat([]byte{1}, 32)), sealed, "files/x", ErrWrongKey},
		{"no key", plain, sealed, "files/x", ErrWrongKey},
		{"unencrypted with key", enc, unsealed, "files/x", errFrame},
		{"flipped zstd", plain, flip(unsealed, len(unsealed)/2), "files/x", errFrame},
		{"truncated zstd", plain, unsealed[:len(unsealed)-10], "files/x", errFrame},
		{"bad magic", plain, flip(unsealed, 0), "files/x", errFrame},
		{"empty", plain, nil, "files/x", errFrame},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeBytes(tc.cd, tc.obj, tc.as)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCodec_Compresses(t *testing.T) {
	cd := mustCodec(t, nil)
	data := stateEntries(1<<20, 1)
	obj := encodeBytes(t, cd, data, "files/x")
	if ratio := float64(len(obj)) / float64(len(data)); ratio > 0.5 {
		t.Fatalf("state entries compress to %.2f of their size", ratio)
	}
}

func FuzzCodec_Decode(f *testing.F) {
	key := bytes.Repeat([]byte{42}, 32)
	for _, k := range [][]byte{nil, key} {
		cd := mustCodec(f, k)
		var b bytes.Buffer
		cd.encode(&b, bytes.NewReader([]byte("hello state")), "files/x")
		f.Add(b.Bytes(), k != nil)
	}
	plain, enc := mustCodec(f, nil), mustCodec(f, key)
	f.Fuzz(func(t *testing.T, obj []byte, encrypted bool) {
		cd := plain
		if encrypted {
			cd = enc
		}
		// Must not panic or hang; any error is fine.
		decodeBytes(cd, obj, "files/x")
	})
}

// TestCodec_KeyDerivation pins the key schedule (known answers computed
// with an independent RFC 5869 implementation): K_enc and the key id from
// the configured key, K_obj from K_enc and an object's salt.
func TestCodec_KeyDerivation(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	cd := mustCodec(t, key)
	salt := bytes.Repeat([]byte{0xa5}, saltSize)
	obj, err := cd.objectKey(salt)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, got, want string }{
		{"K_enc", hex.EncodeToString(cd.encKey), "b62493ae2c1efb6df094d3d3418386ec3ef4c6c0725fad5a88166f8a8b92dfad"},
		{"key id", cd.keyIDHex(), "1d88443636b3330d"},
		{"K_obj", hex.EncodeToString(obj), "bc777944729aa968d6f302697219936dad60245c8885826ec5786c14f44a57b6"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %s, want %s", tc.name, tc.got, tc.want)
		}
	}
	if bytes.Equal(cd.encKey, key) {
		t.Error("the configured key is used for encryption as is")
	}
}

// TestCodec_FreshKeyPerObject: two encodings of the same plaintext under
// the same name have different salts, so different object keys.
func TestCodec_FreshKeyPerObject(t *testing.T) {
	cd := mustCodec(t, bytes.Repeat([]byte{42}, 32))
	a := encodeBytes(t, cd, []byte("same state"), "gw-1/files/x")
	b := encodeBytes(t, cd, []byte("same state"), "gw-1/files/x")
	if bytes.Equal(a[16:16+saltSize], b[16:16+saltSize]) || bytes.Equal(a[sealedHeaderSize:], b[sealedHeaderSize:]) {
		t.Fatal("two objects share a salt or ciphertext")
	}
	if a[4] != frameVersion {
		t.Fatalf("format version %d, want %d", a[4], frameVersion)
	}
}
