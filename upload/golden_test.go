package upload

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The golden files of the object formats: go test ./upload/ -run TestGolden -update
// rewrites them. Each TestGolden_* decodes its file and checks the content,
// then encodes the same content and compares bytes: a difference means the
// encoding changed, and its version constant must be raised with it (then
// -update writes the golden file of the new version). A golden file of
// another version than the constant fails too, so a bump comes with a new
// golden file.
var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenFile returns testdata/name, first writing got to it with -update,
// and fails if got differs from it.
func goldenFile(t *testing.T, name string, got []byte, version string) []byte {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("this build encodes %s as\n%x\nthe golden file holds\n%x\nthe encoding changed: bump %s and run with -update",
			name, got, want, version)
	}
	return want
}

// goldenPlain is the plaintext of the golden objects: a manifest-like
// JSON text.
var goldenPlain = []byte(`{"format_version":2,"id":7,"kind":"full","files":[` +
	strings.Repeat(`{"name":"files/aa.snap","size":1234,"kind":"full","checkpoint":7,"task":"window/0"},`, 20) +
	`{}]}`)

// goldenKey is the object's key in the bucket, which an encrypted object
// authenticates.
const goldenKey = "gw-1/manifests/00000000000000000007.json"

// TestGolden_Object: testdata/golden/object.eddy (not encrypted) and
// object-aes.eddy (encrypted with the key 0x5a… and a salt of 0x11…: the
// salt is random in use, fixed here).
func TestGolden_Object(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  []byte
	}{
		{"object.eddy", nil},
		{"object-aes.eddy", bytes.Repeat([]byte{0x5a}, 32)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cd := mustCodec(t, tc.key)
			cd.salts = bytes.NewReader(bytes.Repeat([]byte{0x11}, saltSize))
			golden := goldenFile(t, filepath.Join("golden", tc.name), encodeBytes(t, cd, goldenPlain, goldenKey), "frameVersion")
			if len(golden) < plainHeaderSize || string(golden[:4]) != frameMagic {
				t.Fatalf("golden %s has no frame header", tc.name)
			}
			if v := golden[4]; v != frameVersion {
				t.Fatalf("golden %s is format version %d, this build writes %d: run with -update to write the golden file of the new version", tc.name, v, frameVersion)
			}
			if enc := golden[6] == encryptionAESGCM; enc != (tc.key != nil) {
				t.Fatalf("golden %s: encrypted %v, want %v", tc.name, enc, tc.key != nil)
			}
			got, err := decodeBytes(mustCodec(t, tc.key), golden, goldenKey)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, goldenPlain) {
				t.Errorf("golden %s decodes to %q, want %q", tc.name, got, goldenPlain)
			}
		})
	}
}

// TestGolden_ChunkIndex: testdata/golden/chunk-index.json, the index of a
// file of two chunks.
func TestGolden_ChunkIndex(t *testing.T) {
	idx := chunkIndex{Version: chunkIndexVersion, Size: ChunkSize + 5, SHA256: strings.Repeat("ab", 32), ChunkSize: ChunkSize,
		Chunks: []chunkEntry{{Size: ChunkSize, SHA256: strings.Repeat("cd", 32)}, {Size: 5, SHA256: strings.Repeat("ef", 32)}}}
	b, err := json.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	golden := goldenFile(t, filepath.Join("golden", "chunk-index.json"), b, "chunkIndexVersion")
	var got chunkIndex
	if err := json.Unmarshal(golden, &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != chunkIndexVersion {
		t.Fatalf("golden chunk index is format version %d, this build writes %d: run with -update to write the golden file of the new version", got.Version, chunkIndexVersion)
	}
	if !reflect.DeepEqual(got, idx) {
		t.Errorf("golden chunk index reads as %+v, want %+v", got, idx)
	}
}

// TestCodec_OtherVersionRefused: an object of another format version (an
// earlier development build's, or a newer Eddy's) is refused as a bad
// frame saying the version found and the one read.
func TestCodec_OtherVersionRefused(t *testing.T) {
	cd := mustCodec(t, nil)
	good := encodeBytes(t, cd, goldenPlain, goldenKey)
	for _, v := range []byte{frameVersion - 1, frameVersion + 1} {
		b := bytes.Clone(good)
		b[4] = v
		_, err := decodeBytes(cd, b, goldenKey)
		if !errors.Is(err, errFrame) {
			t.Fatalf("version %d: %v, want errFrame", v, err)
		}
		if want := fmt.Sprintf("format version %d, this build reads version %d only", v, frameVersion); !strings.Contains(err.Error(), want) {
			t.Errorf("version %d: %v, want it to say %q", v, err, want)
		}
	}
}
