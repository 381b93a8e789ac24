package walsink

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

const (
	helperEnvDir     = "WALSINK_HELPER_DIR"
	helperEnvBroker  = "WALSINK_HELPER_BROKER"
	helperEnvWindow  = "WALSINK_HELPER_MAX_INFLIGHT"
	helperEnvVersion = "WALSINK_HELPER_PROTOCOL_VERSION"
	helperEpochs     = 100
	helperPerEpoch   = 100
)

// TestHelperSinkProcess is not a test: TestSink_CrashRecovery runs the test
// binary as a child with this test selected. The child plays agent and
// checkpoint coordinator: it writes a deterministic sequence of epochs,
// pre-commits each, records the completed checkpoint durably (a file,
// fsynced and renamed: the coordinator's manifest), then commits. On start
// it recovers to the checkpoint that file names and continues after it.
func TestHelperSinkProcess(t *testing.T) {
	dir := os.Getenv(helperEnvDir)
	if dir == "" {
		t.Skip("helper process for TestSink_CrashRecovery")
	}
	window, _ := strconv.Atoi(os.Getenv(helperEnvWindow))
	version, _ := strconv.Atoi(os.Getenv(helperEnvVersion))
	s, err := Open(filepath.Join(dir, "wal"), Options{Broker: os.Getenv(helperEnvBroker), ClientID: "walsink-crash",
		ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond, SegmentBytes: 64 << 10, DrainRate: 2000,
		MaxInflight: window, ProtocolVersion: byte(version)}, testLogger(t))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper: open:", err)
		os.Exit(2)
	}
	last := readCompleted(dir)
	if err := s.Recover(last); err != nil {
		fmt.Fprintln(os.Stderr, "helper: recover:", err)
		os.Exit(2)
	}
	var buf []byte
	msgs := make([]Message, helperPerEpoch)
	for e := last + 1; e <= helperEpochs; e++ {
		buf = buf[:0]
		ends := make([]int, helperPerEpoch)
		for i := range helperPerEpoch {
			buf = testPayload(buf, e, i)
			ends[i] = len(buf)
		}
		start := 0
		for i := range helperPerEpoch {
			msgs[i] = Message{Topic: "up/crash", Payload: buf[start:ends[i]]}
			start = ends[i]
		}
		must(s.Write(e, msgs))
		must(s.PreCommit(e))
		writeCompleted(dir, e)
		must(s.Commit(e))
		time.Sleep(20 * time.Millisecond) // pacing: a checkpoint interval, so kills land in every phase
	}
	// Drained, or killed meanwhile; the parent bounds the final run.
	must(await.Within(2*time.Minute, func() error {
		if n := s.Stats().BacklogMessages; n > 0 {
			return fmt.Errorf("backlog of %d messages", n)
		}
		return nil
	}))
	must(s.Close())
	fmt.Println("HELPER-DONE")
	os.Exit(0)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
}

func readCompleted(dir string) uint64 {
	b, err := os.ReadFile(filepath.Join(dir, "completed"))
	if err != nil || len(b) != 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

func writeCompleted(dir string, epoch uint64) {
	tmp := filepath.Join(dir, "completed.tmp")
	f, err := os.Create(tmp)
	must(err)
	_, err = f.Write(binary.LittleEndian.AppendUint64(nil, epoch))
	must(err)
	must(f.Sync())
	must(f.Close())
	must(os.Rename(tmp, filepath.Join(dir, "completed")))
	d, err := os.Open(dir)
	must(err)
	must(d.Sync())
	must(d.Close())
}

// TestSink_CrashRecovery SIGKILLs a real process running the sink at random
// moments, ten times, and restarts it; the collector must end with every
// output exactly once, in order.
func TestSink_CrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs child processes")
	}
	forUpstreams(t, testCrashRecovery)
}

func testCrashRecovery(t *testing.T, b *mosquitto.Broker, u upstream) {
	maxInflight := u.maxInflight
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("WALSINK_CRASH_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (WALSINK_CRASH_SEED to repeat)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	c := startCollector(t, b.URL(), "up/#")
	dir := t.TempDir()
	start := func() (*exec.Cmd, chan error) {
		args := []string{"-test.run=^TestHelperSinkProcess$", "-test.count=1"}
		if testing.Verbose() {
			args = append(args, "-test.v")
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), helperEnvDir+"="+dir, helperEnvBroker+"="+b.URL(),
			helperEnvWindow+"="+strconv.Itoa(maxInflight), helperEnvVersion+"="+strconv.Itoa(int(u.version)))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		return cmd, done
	}
rounds:
	for round := range 10 {
		cmd, done := start()
		wait := time.Duration(100+rng.IntN(500)) * time.Millisecond
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: helper failed before the kill: %v", round, err)
			}
			// A fast machine finished the job between two kills: the
			// kills so far are the test, and the final run only drains.
			t.Logf("round %d: the helper finished all %d epochs before the kill", round, helperEpochs)
			break rounds
		case <-time.After(wait):
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		t.Logf("round %d: killed after %v; completed epoch %d, collector has %d", round, wait, readCompleted(dir), len(c.received()))
	}
	_, done := start()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("final run: %v", err)
		}
	case <-time.After(120 * time.Second):
		t.Fatal("final run did not finish")
	}
	var want []string
	for e := uint64(1); e <= helperEpochs; e++ {
		for i := range helperPerEpoch {
			want = append(want, string(testID(nil, e, i)))
		}
	}
	c.waitFor(t, len(want), 30*time.Second)
	c.noMoreThan(t, len(want), 300*time.Millisecond)
	checkExactlyOnce(t, c.received(), want)
	t.Logf("broker-side DUP repeats ignored by the collector: %d", c.brokerDups)
}
