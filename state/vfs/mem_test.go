package vfs

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"testing"
)

func write(t *testing.T, fsys FS, name, data string, sync bool) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// contents returns name's contents, or "<missing>".
func contents(t *testing.T, fsys FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCrashableMem_Model pins the crash model of MemFS: contents durable up
// to the last Sync, directory entries durable only after SyncDir.
func TestCrashableMem_Model(t *testing.T) {
	tests := []struct {
		name string
		do   func(t *testing.T, m *MemFS)
		want map[string]string // path → contents after the crash
	}{
		{"synced file in synced dir survives", func(t *testing.T, m *MemFS) {
			write(t, m, "/d/a", "hello", true)
			m.SyncDir("/d")
		}, map[string]string{"/d/a": "hello"}},
		{"unsynced dir entry is lost though its file was synced", func(t *testing.T, m *MemFS) {
			write(t, m, "/d/a", "hello", true)
		}, map[string]string{"/d/a": "<missing>"}},
		{"contents past the last sync are lost", func(t *testing.T, m *MemFS) {
			f, _ := m.Create("/d/a")
			f.Write([]byte("one"))
			f.Sync()
			f.Write([]byte("two"))
			m.SyncDir("/d")
		}, map[string]string{"/d/a": "one"}},
		{"rename before sync leaves the new name empty", func(t *testing.T, m *MemFS) {
			write(t, m, "/d/a.tmp", "hello", false)
			m.Rename("/d/a.tmp", "/d/a")
			m.SyncDir("/d")
		}, map[string]string{"/d/a": "", "/d/a.tmp": "<missing>"}},
		{"unsynced rename is undone", func(t *testing.T, m *MemFS) {
			write(t, m, "/d/a.tmp", "hello", true)
			m.SyncDir("/d")
			m.Rename("/d/a.tmp", "/d/a")
		}, map[string]string{"/d/a": "<missing>", "/d/a.tmp": "hello"}},
		{"unsynced remove is undone", func(t *testing.T, m *MemFS) {
			write(t, m, "/d/a", "hello", true)
			m.SyncDir("/d")
			m.Remove("/d/a")
		}, map[string]string{"/d/a": "hello"}},
		{"truncate after sync is undone", func(t *testing.T, m *MemFS) {
			write(t, m, "/d/a", "hello", true)
			m.SyncDir("/d")
			f, _ := m.OpenFile("/d/a", os.O_RDWR)
			f.Truncate(2)
		}, map[string]string{"/d/a": "hello"}},
		{"MkdirAll without syncing the parent loses the directory", func(t *testing.T, m *MemFS) {
			m.MkdirAll("/x/y", 0o755)
			write(t, m, "/x/y/a", "hello", true)
			m.SyncDir("/x/y")
		}, map[string]string{"/x/y/a": "<missing>"}},
		{"MkdirAllSynced makes the directories durable", func(t *testing.T, m *MemFS) {
			if err := MkdirAllSynced(m, "/x/y", 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, m, "/x/y/a", "hello", true)
			m.SyncDir("/x/y")
		}, map[string]string{"/x/y/a": "hello"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewCrashableMem()
			if err := MkdirAllSynced(m, "/d", 0o755); err != nil {
				t.Fatal(err)
			}
			tt.do(t, m)
			c := m.CrashClone(CrashOptions{})
			for name, want := range tt.want {
				if got := contents(t, c, name); got != want {
					t.Errorf("%s after the crash = %q, want %q", name, got, want)
				}
			}
		})
	}
}

// TestCrashableMem_TornWrite: with Rand, a crash keeps the durable contents
// and a prefix of what was appended after them, never anything else.
func TestCrashableMem_TornWrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	for range 200 {
		m := NewCrashableMem()
		MkdirAllSynced(m, "/d", 0o755)
		f, _ := m.Create("/d/a")
		f.Write([]byte("ab"))
		f.Sync()
		m.SyncDir("/d")
		f.Write([]byte("cd"))
		got := contents(t, m.CrashClone(CrashOptions{Rand: rng}), "/d/a")
		switch got {
		case "ab", "abc", "abcd":
			seen[got] = true
		default:
			t.Fatalf("torn contents %q, want a prefix of abcd holding ab", got)
		}
	}
	if len(seen) != 3 {
		t.Errorf("seen %v, want every prefix", seen)
	}
}

func TestCrashableMem_Lock(t *testing.T) {
	m := NewCrashableMem()
	l, err := m.Lock("/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lock("/LOCK"); err == nil {
		t.Fatal("a second Lock succeeded")
	}
	if _, err := m.CrashClone(CrashOptions{}).Lock("/LOCK"); err != nil {
		t.Fatalf("a crash did not release the lock: %v", err)
	}
	l.Close()
	if _, err := m.Lock("/LOCK"); err != nil {
		t.Fatal(err)
	}
}

// TestFS_SameBehaviour runs the same operations on Default and on MemFS and
// compares what they report.
func TestFS_SameBehaviour(t *testing.T) {
	for name, fsys := range map[string]FS{"os": Default, "mem": NewCrashableMem()} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if name == "mem" {
				dir = "/tmp/x"
			}
			if err := MkdirAllSynced(fsys, dir+"/sub", 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := fsys.OpenFile(dir+"/a", os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte("abc"))
			f.Write([]byte("def"))
			f.Close()
			if _, err := fsys.OpenFile(dir+"/a", os.O_WRONLY|os.O_CREATE|os.O_EXCL); !errors.Is(err, fs.ErrExist) {
				t.Errorf("O_EXCL on an existing file: %v", err)
			}
			if _, err := fsys.Open(dir + "/nope"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Open of a missing file: %v", err)
			}
			g, _ := fsys.OpenFile(dir+"/a", os.O_RDWR)
			buf := make([]byte, 4)
			if n, err := g.ReadAt(buf, 4); n != 2 || err != io.EOF || string(buf[:2]) != "ef" {
				t.Errorf("ReadAt past the end = %d, %v, %q", n, err, buf[:n])
			}
			g.Truncate(3)
			fi, _ := g.Stat()
			g.Close()
			if fi.Size() != 3 {
				t.Errorf("size after Truncate = %d", fi.Size())
			}
			if err := g.Sync(); !errors.Is(err, fs.ErrClosed) {
				t.Errorf("Sync after Close: %v", err)
			}
			if err := fsys.Rename(dir+"/a", dir+"/b"); err != nil {
				t.Fatal(err)
			}
			names, _ := fsys.List(dir)
			if len(names) != 2 || names[0] != "b" || names[1] != "sub" {
				t.Errorf("List = %v", names)
			}
			if err := fsys.Remove(dir + "/b"); err != nil {
				t.Fatal(err)
			}
			if _, err := fsys.Stat(dir + "/b"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Stat after Remove: %v", err)
			}
		})
	}
}
