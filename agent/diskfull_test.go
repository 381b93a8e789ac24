package agent

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// TestDiskBudget_IngestHoldsUntilUsageDrops: once the components together
// use the whole disk budget (here a checkpoint file as large as max_disk),
// a reading published into the embedded broker stays unacknowledged and
// out of the ingest log, /readyz's disk check says "max_disk reached: X of
// Y"; once usage drops below the budget (the checkpoint collected) the
// reading is logged and acknowledged, and the check is gone.
func TestDiskBudget_IngestHoldsUntilUsageDrops(t *testing.T) {
	b, l, in := startEmbeddedIntake(t, 0)
	holds := &diskHolds{}
	in.mu.Lock()
	in.holds = holds
	in.mu.Unlock()

	ckpts := t.TempDir()
	big := filepath.Join(ckpts, "chk-1")
	const budget = 64 << 10
	if err := os.WriteFile(big, make([]byte, budget), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &diskMeter{usage: make([]atomic.Int64, len(diskComponents)), holds: holds,
		paths:  [][]string{{l.Dir()}, nil, {ckpts}, nil, nil},
		statfs: func(string) (fsStats, error) { return fsStats{size: 1 << 30, free: 1 << 29}, nil }}
	m.budget.Store(budget)
	m.sample()
	m.enforceBudget()
	detail := diskFullDetail("", holds.details())
	if !strings.Contains(detail, "disk_full: max_disk: max_disk reached: 64.0 KiB of 64.0 KiB") {
		t.Fatalf("readiness detail %q does not say the budget is reached", detail)
	}
	r := evaluateReadiness(readinessInput{diskFull: detail})
	if r.Ready {
		t.Fatalf("ready with the budget reached: %+v", r.Checks)
	}

	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("sensor").SetAutoReconnect(false))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	tok := c.Publish("sensors/s1/telemetry", 1, false, `{"seq":1}`)
	// Not acknowledged while held: bounded by a few retries of the intake.
	if tok.WaitTimeout(3 * noSpaceRetry) {
		t.Fatalf("the reading was acknowledged with the disk budget reached (err %v)", tok.Error())
	}
	if n := l.LastOffset(); n != 0 {
		t.Fatalf("the log holds %d entries with the budget reached", n)
	}

	if err := os.Remove(big); err != nil {
		t.Fatal(err)
	}
	m.sample()
	m.enforceBudget()
	if d := holds.details(); len(d) != 0 {
		t.Fatalf("holds after usage dropped: %v", d)
	}
	if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("the reading was not acknowledged after usage dropped: %v", tok.Error())
	}
	if n := l.LastOffset(); n != 1 {
		t.Fatalf("the log holds %d entries, want 1", n)
	}
}

// TestDiskMeter_DerivedBudgetFollowsFreeSpace: without max_disk the budget
// is derived again at each sample, so a disk that was full at start (the
// budget then was only what Eddy held) holds ingest until an operator frees
// space, and releases it then without a restart.
func TestDiskMeter_DerivedBudgetFollowsFreeSpace(t *testing.T) {
	const mib = 1 << 20
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "seg"), make([]byte, mib), 0o600); err != nil {
		t.Fatal(err)
	}
	st := fsStats{size: 64 * mib, free: 0}
	holds := &diskHolds{}
	m := &diskMeter{dataDir: dir, derived: true, usage: make([]atomic.Int64, len(diskComponents)), holds: holds,
		paths:  [][]string{{dir}, nil, nil, nil, nil},
		statfs: func(string) (fsStats, error) { return st, nil }}
	for _, tt := range []struct {
		name       string
		free       int64
		wantBudget int64
		held       bool
	}{
		{"full disk: only what Eddy holds", 0, mib, true},
		{"space freed", 8 * mib, 9 * mib, false},
		{"more freed than half the file system", 60 * mib, 32 * mib, false},
	} {
		st.free = tt.free
		m.sample()
		m.enforceBudget()
		if got := m.budget.Load(); got != tt.wantBudget {
			t.Errorf("%s: budget %d, want %d", tt.name, got, tt.wantBudget)
		}
		if held := holds.reason(budgetPlace) != ""; held != tt.held {
			t.Errorf("%s: held %v, want %v", tt.name, held, tt.held)
		}
	}
}
