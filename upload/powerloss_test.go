package upload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/state/vfs"
)

// The directory the power-loss cycles download into, as a restore stages
// checkpoint files.
const plDir = "/data/restore.tmp/files"

// plObject is an object in the bucket and what it holds.
type plObject struct {
	name, sha string
	data      []byte
}

// runDownloadPowerLoss runs cycles of download → power cut → recover on a
// vfs.CutFS, the cut in the middle of a random file operation (also during
// recovery), and returns the first broken guarantee: every download
// GetFile acknowledged (returned nil for) is in plDir after the cut with
// the object's exact bytes; no name in plDir ever holds anything else
// (partial, empty or doubled contents); everything else left is a
// temporary file IsDownloadTemp recognises, so the owner's cleanup leaves
// no orphan.
func runDownloadPowerLoss(t *testing.T, env *testEnv, objects []plObject, seed uint64, cycles int, breakFsync func(*vfs.CutOptions)) error {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	disk := vfs.NewCrashableMem()
	if err := vfs.MkdirAllSynced(disk, plDir, 0o750); err != nil {
		return err
	}
	acked := map[string][]byte{} // name → bytes, for every acknowledged download not removed since
	for cycle := range cycles {
		var power *vfs.CutFS
		for {
			opts := vfs.CutOptions{Rand: rng}
			if breakFsync != nil {
				breakFsync(&opts)
			}
			power = vfs.NewCutFS(disk, opts)
			if rng.IntN(4) == 0 {
				power.Arm(1 + rng.IntN(4)) // the power fails again while cleaning up
			}
			err := recoverDownloads(power, acked, rng)
			if img := power.Image(); img != nil {
				disk = img
				continue
			}
			if err != nil {
				return fmt.Errorf("seed %d, cycle %d, after the power cut: %w", seed, cycle, err)
			}
			break
		}
		c := env.client(t, func(o *Options) { o.FS = power })
		c.chunkSize, c.largeFile = 1<<10, 2<<10
		power.Arm(1 + rng.IntN(40))
		for range 1 + rng.IntN(4) {
			o := objects[rng.IntN(len(objects))]
			ref := FileRef{Name: o.name, LocalPath: filepath.Join(plDir, o.name)}
			if rng.IntN(2) == 0 {
				ref.SHA256, ref.Size = o.sha, int64(len(o.data))
			}
			err := c.GetFileRef(context.Background(), ref)
			if err != nil && power.Image() == nil {
				return fmt.Errorf("seed %d, cycle %d: %w", seed, cycle, err)
			}
			if err != nil {
				break
			}
			acked[o.name] = o.data
		}
		c.Close()
		power.Cut()
		disk = power.Image()
	}
	return nil
}

// recoverDownloads checks what a power cut left in plDir against acked,
// removes the temporary files, and removes one acknowledged download in
// four (the owner consuming it), durably.
func recoverDownloads(fsys vfs.FS, acked map[string][]byte, rng *rand.Rand) error {
	names, err := fsys.List(plDir)
	if err != nil {
		return err
	}
	present := map[string]bool{}
	for _, name := range names {
		path := filepath.Join(plDir, name)
		if IsDownloadTemp(name) {
			if err := fsys.Remove(path); err != nil {
				return err
			}
			continue
		}
		data, err := readAll(fsys, path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		if want := strings.TrimSuffix(name, ".snap"); hex.EncodeToString(sum[:]) != want {
			return fmt.Errorf("%s holds %d bytes that are not the object's (an orphan or a damaged download)", name, len(data))
		}
		present[name] = true
	}
	for name := range acked {
		if !present[name] {
			return fmt.Errorf("acknowledged download lost: %s is gone", name)
		}
	}
	for name := range present {
		if _, ok := acked[name]; ok && rng.IntN(4) == 0 {
			delete(acked, name) // a removal the cut interrupts may land
			if err := fsys.Remove(filepath.Join(plDir, name)); err != nil {
				return err
			}
		}
	}
	return fsys.SyncDir(plDir)
}

func readAll(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// plObjects uploads objects of 0 to 5 KiB (above 2 KiB chunked, in 1 KiB
// chunks) and returns them.
func plObjects(t *testing.T, env *testEnv) []plObject {
	c := env.client(t, nil)
	defer c.Close()
	c.chunkSize, c.largeFile = 1<<10, 2<<10
	dir := t.TempDir()
	var objects []plObject
	for i, size := range []int{0, 1, 700, 2 << 10, 3<<10 + 5, 5 << 10} {
		data := stateEntries(size, uint64(i+1))
		sum := sha256.Sum256(data)
		o := plObject{name: hex.EncodeToString(sum[:]) + ".snap", sha: hex.EncodeToString(sum[:]), data: data}
		path, _ := writeFile(t, dir, o.name, data)
		if err := c.PutFile(ctxT(t), o.name, path); err != nil {
			t.Fatal(err)
		}
		objects = append(objects, o)
	}
	return objects
}

// TestGetFile_PowerLoss: 2,000 download → power cut → recover cycles
// against versitygw, downloads written through vfs.CutFS with the cut in
// the middle of a random file operation (a write in flight lands a random
// prefix, a sync or rename lands or not), torn writes and written-back
// directories at random. After every cut: every acknowledged download is
// there with its object's bytes, no name holds anything else, and the rest
// is download temporaries, removed by the cleanup.
func TestGetFile_PowerLoss(t *testing.T) {
	env := newEnv(t)
	objects := plObjects(t, env)
	if err := runDownloadPowerLoss(t, env, objects, 1, 2000, nil); err != nil {
		t.Fatal(err)
	}
}

// TestGetFile_PowerLossDetectsBrokenFsync: with the download directory's
// fsync left out, or the temporary file's fsync before its rename, the
// power-loss cycles find the damage.
func TestGetFile_PowerLossDetectsBrokenFsync(t *testing.T) {
	env := newEnv(t)
	objects := plObjects(t, env)
	tests := []struct {
		name       string
		breakFsync func(*vfs.CutOptions)
		want       string
	}{
		{"no directory fsync", func(o *vfs.CutOptions) {
			o.BreakSyncDir = func(dir string) bool { return dir == plDir }
		}, "acknowledged download lost"},
		{"rename before fsync", func(o *vfs.CutOptions) {
			o.BreakSync = IsDownloadTemp
		}, "not the object's"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runDownloadPowerLoss(t, env, objects, 1, 2000, tt.breakFsync)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v, want an error saying %q", err, tt.want)
			}
			t.Log(err)
		})
	}
}
