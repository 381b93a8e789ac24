//go:build !race

package state_test

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
	"github.com/eddy-edge/eddy/window"
	"github.com/eddy-edge/eddy/window/aggregate"
)

// rssAnon returns RssAnon of /proc/self/status in bytes: anonymous resident
// memory (Go heap, stacks, runtime), not bbolt's file-backed mmap pages.
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

// 1M keys with one open window each, on bbolt with an
// 8 MiB cache: correct aggregates, and Go heap and anonymous RSS under
// 64 MiB while all million windows are open and after they fire.
func TestBolt_MillionKeysBoundedMemory(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("needs a 64-bit address space for the ~200 MB working file")
	}
	const nKeys = 1_000_000
	const limit = 64 << 20
	start := time.Now()
	be, err := state.OpenBolt(filepath.Join(t.TempDir(), "state.db"), state.BoltOptions{MaxSize: 1 << 30, CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	funcs := []aggregate.Func{aggregate.Count, aggregate.Sum}
	store, err := window.NewStateStore(be, "temp_1m", funcs)
	if err != nil {
		t.Fatal(err)
	}
	spec := window.Spec{
		Assigner: window.Tumbling(1000, 0, true),
		Aggs:     []window.AggSpec{{Func: aggregate.Count, Arg: -1}, {Func: aggregate.Sum, Arg: 0}},
	}
	op, err := window.NewOperator(spec, store)
	if err != nil {
		t.Fatal(err)
	}
	var out window.Output
	var key []byte
	vals := []float64{0}
	// Key i gets two readings in window [i/1000*1000, +1000): sum = 3i.
	for pass := range 2 {
		for i := range nKeys {
			key = fmt.Appendf(key[:0], "sensor-%07d", i)
			vals[0] = float64(i * (pass + 1))
			e := window.Element{Key: key, KeyGroup: state.KeyGroup(key, state.DefaultMaxKeyGroups), Time: int64(i), Values: vals}
			if v := op.Process(&e, &out); v != window.Accepted {
				t.Fatalf("key %d: %v", i, v)
			}
		}
	}
	if err := store.Err(); err != nil {
		t.Fatal(err)
	}
	if s := op.Stats(); s.OpenWindows != nKeys || s.PendingTimers != nKeys {
		t.Fatalf("stats %+v", s)
	}
	measure := func(when string) {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		rss := rssAnon(t)
		t.Logf("%s: heap in use %.1f MiB, RssAnon %.1f MiB, cache %.1f MiB, %v elapsed", when,
			float64(ms.HeapInuse)/(1<<20), float64(rss)/(1<<20), float64(be.CacheBytes())/(1<<20), time.Since(start).Round(time.Millisecond))
		if ms.HeapInuse > limit || rss > limit {
			t.Errorf("%s: heap %d or RssAnon %d over %d", when, ms.HeapInuse, rss, limit)
		}
	}
	measure("1M windows open")
	fired := 0
	for wm := int64(999); wm < nKeys+1000; wm += 1000 {
		op.AdvanceWatermark(wm, &out)
		for _, f := range out.Firings {
			i, err := strconv.Atoi(string(f.Key[len("sensor-"):]))
			if err != nil || f.Kind != window.Final || f.Values[0] != 2 || f.Values[1] != float64(3*i) || f.Window.Start != int64(i/1000*1000) {
				t.Fatalf("firing %s %v %v %v", f.Key, f.Window, f.Kind, f.Values)
			}
			fired++
		}
		out.Reset()
	}
	if err := store.Err(); err != nil {
		t.Fatal(err)
	}
	if s := op.Stats(); fired != nKeys || s.OpenWindows != 0 || s.PendingTimers != 0 {
		t.Fatalf("fired %d, stats %+v", fired, s)
	}
	measure("all fired")
}
