package sparkplug

import (
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/state/vfs"
)

// TestNextBdSeq: 0 first, one more per connect, wrapping after 255, kept
// across a power cut after each call.
func TestNextBdSeq(t *testing.T) {
	disk := vfs.NewCrashableMem()
	if err := disk.MkdirAll("data", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := disk.SyncDir("."); err != nil {
		t.Fatal(err)
	}
	path := "data/sparkplug-bdseq"
	for i := range 300 {
		got, err := NextBdSeq(disk, path)
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(i % 256); got != want {
			t.Fatalf("connect %d: bdSeq %d, want %d", i, got, want)
		}
		// What survives a power cut is the successor, so the next
		// connect after a crash never reuses got.
		disk = disk.CrashClone(vfs.CrashOptions{})
	}
}

func TestNextBdSeq_Corrupt(t *testing.T) {
	disk := vfs.NewCrashableMem()
	f, err := disk.Create("bdseq")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("300"))
	f.Close()
	if _, err := NextBdSeq(disk, "bdseq"); err == nil || !strings.Contains(err.Error(), "not a bdSeq") {
		t.Fatalf("err = %v", err)
	}
}
