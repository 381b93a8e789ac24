package ingest

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

const crashDirEnv = "EDDY_INGEST_CRASH_DIR"

var crashOpts = Options{Ack: AfterWrite, SegmentBytes: 8 << 10, MaxDiskBytes: 1 << 30}

// TestHelperWriter is the child of TestCrash_KillDuringAppend: it appends
// test entries in AfterWrite mode until killed, printing "ack N" after
// each Append returns N as its last offset. It does nothing in a normal run.
func TestHelperWriter(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestCrash_KillDuringAppend")
	}
	l, err := Open(dir, crashOpts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 1))
	batch := make([]Entry, 0, 64)
	var line []byte
	for {
		next := l.LastOffset() + 1
		batch = batch[:0]
		for i := range 1 + rng.IntN(64) {
			batch = append(batch, testEntry(next+uint64(i)))
		}
		_, last, err := l.Append(batch)
		if err != nil {
			fmt.Fprintln(os.Stderr, "append:", err)
			os.Exit(2)
		}
		line = strconv.AppendUint(append(line[:0], "ack "...), last, 10)
		line = append(line, '\n')
		if _, err := os.Stdout.Write(line); err != nil {
			os.Exit(3)
		}
	}
}

// TestCrash_KillDuringAppend runs a real writer process and SIGKILLs it at
// random moments, several rounds on one log. After each kill the log must
// reopen with every acknowledged offset present with its content, offsets
// dense from 1, and nothing else: with ack = "after_write" an
// acknowledged reading survives a process crash, though not a power loss.
func TestCrash_KillDuringAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	var acked uint64
	for round := range 8 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 1 + rng.IntN(500)
		br := bufio.NewReader(out)
		lines, killed := 0, false
		for {
			s, err := br.ReadString('\n')
			if err != nil {
				break // EOF once the child is dead; a partial last line is no ack
			}
			var n uint64
			if _, perr := fmt.Sscanf(s, "ack %d\n", &n); perr == nil {
				if n <= acked {
					t.Fatalf("round %d: ack %d after ack %d", round, n, acked)
				}
				acked = n
				lines++
			}
			if lines == killAfter && !killed {
				cmd.Process.Kill() // SIGKILL
				killed = true
			}
		}
		cmd.Wait()
		if lines == 0 {
			t.Fatalf("round %d: the writer acked nothing; stderr: %s", round, stderr.String())
		}

		l := mustOpen(t, dir, crashOpts)
		if l.LastOffset() < acked {
			t.Fatalf("round %d: last offset %d, but %d was acknowledged", round, l.LastOffset(), acked)
		}
		n := readAll(t, l, 0)
		rec := l.Recovery()
		t.Logf("round %d: killed after %d acks; acked %d, log holds %d entries, %d bytes, cut %d bytes",
			round, lines, acked, n, l.SizeBytes(), rec.CutBytes)
		acked = l.LastOffset() // unacked entries that made it are kept; count from there
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
