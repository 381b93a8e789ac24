package agent

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/agent/offsite"
)

func TestDataDirProblem(t *testing.T) {
	self := ids{uid: 1000, gid: 1000}
	for _, tc := range []struct {
		name    string
		mode    fs.FileMode
		owner   ids
		known   bool
		wantFix string // "" means accepted
	}{
		{"own 0700", 0o700, self, true, ""},
		{"own 0750", 0o750, self, true, ""},
		{"own 0755", 0o755, self, true, ""},
		{"own group g+w (user-private group)", 0o770, self, true, ""},
		{"root-owned, not writable by others", 0o755, ids{0, 0}, true, ""},
		{"world-writable", 0o777, self, true, "chmod o-w /d"},
		{"world-writable sticky (like /tmp)", 0o777 | fs.ModeSticky, ids{0, 0}, true, "chmod o-w /d"},
		{"o+w only", 0o702, self, true, "chmod o-w /d"},
		{"shared group g+w", 0o770, ids{1000, 50}, true, "chmod g-w /d"},
		{"root group g+w", 0o770, ids{0, 0}, true, "chmod g-w /d"},
		{"other user's dir", 0o700, ids{1001, 1000}, true, "chown 1000 /d"},
		{"owner unknown, mode fine", 0o770, ids{}, false, ""},
		{"owner unknown, world-writable", 0o777, ids{}, false, "chmod o-w /d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := dataDirProblem("/d", tc.mode|fs.ModeDir, tc.owner, tc.known, self)
			if tc.wantFix == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want a refusal with %q", tc.wantFix)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "agent: data_dir /d ") || !strings.HasSuffix(msg, "fix: "+tc.wantFix) {
				t.Fatalf("error %q should name the path and end with the fix %q", msg, tc.wantFix)
			}
		})
	}
}

func TestCheckDataDir_CreatesMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "data")
	if err := checkDataDir(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The umask may take bits away, never add them.
	if !fi.IsDir() || fi.Mode().Perm()&^dataDirMode != 0 {
		t.Fatalf("created %v, want a directory within %04o", fi.Mode(), dataDirMode)
	}
	if err := checkDataDir(dir); err != nil {
		t.Fatalf("second check of the directory it created: %v", err)
	}
}

func TestCheckDataDir_Existing(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		mode    os.FileMode // 0: do not create
		path    string
		wantErr string
	}{
		{"private", 0o700, "private", ""},
		{"world-writable", 0o777, "open", "chmod o-w "},
		{"sticky world-writable", 0o777 | fs.ModeSticky, "sticky", "chmod o-w "},
		{"a file", 0, "file", "is not a directory"},
		{"empty path", 0, "", "data_dir is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.path != "" {
				path = filepath.Join(root, tc.path)
			}
			if tc.mode != 0 {
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
				// Chmod, not Mkdir's mode, so the umask cannot hide the bits.
				if err := os.Chmod(path, tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			err := checkDataDir(path)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestFileOwner(t *testing.T) {
	fi, err := os.Stat(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	owner, ok := fileOwner(fi)
	if !ok {
		t.Skip("this platform reports no file owner")
	}
	if owner.uid != os.Geteuid() || owner.gid != os.Getegid() {
		t.Fatalf("owner %+v of a directory we created, want uid %d gid %d", owner, os.Geteuid(), os.Getegid())
	}
}

// TestOpenDataDir_RemovesLeftoverStaging: `eddy run` opening its data_dir
// removes an interrupted restore's staging directory and logs one line;
// without one it logs nothing about it.
func TestOpenDataDir_RemovesLeftoverStaging(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dataDir, dataDirMode); err != nil {
		t.Fatal(err)
	}
	staging := filepath.Join(dataDir, offsite.StagingDir)
	const line = "removed an interrupted restore's staging directory"
	for i, want := range []int{1, 0} { // the second open finds none
		if want == 1 {
			// What an interrupted restore leaves: a partial download.
			if err := os.MkdirAll(filepath.Join(staging, "files"), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(staging, "files", "t0-1.snap.partial"), []byte("half a download"), 0o640); err != nil {
				t.Fatal(err)
			}
		}
		var logs bytes.Buffer
		if err := openDataDir(dataDir, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(staging); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("open %d: %s after the open: %v", i+1, offsite.StagingDir, err)
		}
		if got := strings.Count(logs.String(), line); got != want {
			t.Errorf("open %d: %d log lines %q, want %d:\n%s", i+1, got, line, want, logs.String())
		}
	}
}
