//go:build !race

package keyed

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/state"
)

// TestMillionKeys_BoundedMemory keeps prev() and changed() state for 1M
// keys on bbolt with an 8 MiB cache, as state's
// TestBolt_MillionKeysBoundedMemory keeps 1M open windows, and holds it to
// the same budget: Go heap and RssAnon ≤ 64 MiB. Each key's second reading
// must see its first (prev) and its change.
func TestMillionKeys_BoundedMemory(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("needs a 64-bit address space for the working file")
	}
	const nKeys = 1_000_000
	const limit = 64 << 20
	start := time.Now()
	be, err := state.OpenBolt(filepath.Join(t.TempDir(), "state.db"), state.BoltOptions{MaxSize: 1 << 30, CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	h := newHarness(t, Arrival, 0, "", "p=prev(event.v)", "c=changed(event.v)")
	h.start(be)
	ev, op := h.evs[0], h.ops[0]
	var r Reading
	var payload []byte
	bad := 0
	handler := func(r *Reading) error {
		if ev.Eval(r) != Pass {
			bad++
			return nil
		}
		p, c := ev.Rec.Fields[h.spec.Maps[0].Slot], ev.Rec.Fields[h.spec.Maps[1].Slot]
		i, _ := strconv.Atoi(string(r.Key[7:]))
		if r.Time >= nKeys && (p.Num != float64(i) || c.Num != 1) { // the second pass
			bad++
		}
		return nil
	}
	for pass := range 2 {
		for i := range nKeys {
			r.Key = fmt.Appendf(r.Key[:0], "sensor-%07d", i)
			r.KeyGroup = state.KeyGroup(r.Key, state.DefaultMaxKeyGroups)
			r.Time, r.Seq = int64(pass*nKeys+i), uint64(pass*nKeys+i)
			payload = fmt.Appendf(payload[:0], `{"v":%d}`, i*(pass+1)+pass)
			r.Payload = payload
			if _, err := op.Process(&r, 0, handler); err != nil {
				t.Fatal(err)
			}
		}
	}
	if bad != 0 {
		t.Fatalf("%d readings saw the wrong state", bad)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	rss := rssAnon(t)
	u := be.Usage()
	t.Logf("1M keys: %d entries, heap in use %.1f MiB, RssAnon %.1f MiB, cache %.1f MiB, working file %.1f MiB, %v",
		u.Keys, float64(ms.HeapInuse)/(1<<20), float64(rss)/(1<<20), float64(be.CacheBytes())/(1<<20), float64(u.FileBytes)/(1<<20), time.Since(start).Round(time.Millisecond))
	if u.Keys != nKeys {
		t.Errorf("%d state entries, want one per key", u.Keys)
	}
	if ms.HeapInuse > limit || rss > limit {
		t.Errorf("heap %d or RssAnon %d over %d", ms.HeapInuse, rss, limit)
	}
}

// rssAnon is the process's anonymous resident memory, bytes.
func rssAnon(t testing.TB) int {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("RssAnon:")); ok {
			kb, err := strconv.Atoi(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))))
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no RssAnon in /proc/self/status")
	return 0
}
