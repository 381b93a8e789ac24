package window

import (
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/window/aggregate"
)

// benchKeys returns n keys with their key groups.
func benchKeys(n int) ([][]byte, []uint16) {
	keys := make([][]byte, n)
	groups := make([]uint16, n)
	for i := range keys {
		keys[i] = []byte("device-" + strconv.Itoa(i))
		groups[i] = state.KeyGroup(keys[i], state.DefaultMaxKeyGroups)
	}
	return keys, groups
}

var benchAggs = []AggSpec{
	{Func: aggregate.Count, Arg: -1},
	{Func: aggregate.Sum, Arg: 0},
	{Func: aggregate.Avg, Arg: 0},
}

// benchOperator feeds readings round-robin over nKeys keys, each key getting
// one reading every everyMs of event time, and a watermark (2 s behind)
// after each round, as a source batch would. It reports readings per second
// of CPU time.
func benchOperator(b *testing.B, a Assigner, nKeys int, everyMs int64) {
	benchOperatorOn(b, NewMemoryStore(), a, nKeys, everyMs)
}

// benchOperatorBolt is benchOperator on the agent's store: StateStore over
// bbolt with the default caches.
func benchOperatorBolt(b *testing.B, a Assigner, nKeys int, everyMs int64) {
	be, err := state.OpenBolt(filepath.Join(b.TempDir(), "state.db"), state.BoltOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	var funcs []aggregate.Func
	for _, a := range benchAggs {
		funcs = append(funcs, a.Func)
	}
	store, err := NewStateStore(be, "op", funcs)
	if err != nil {
		b.Fatal(err)
	}
	benchOperatorOn(b, store, a, nKeys, everyMs)
	if err := store.Err(); err != nil {
		b.Fatal(err)
	}
}

func benchOperatorOn(b *testing.B, store Store, a Assigner, nKeys int, everyMs int64) {
	keys, groups := benchKeys(nKeys)
	op, err := NewOperator(Spec{Assigner: a, Aggs: benchAggs}, store)
	if err != nil {
		b.Fatal(err)
	}
	var out Output
	vals := []float64{21.5}
	e := Element{Values: vals}
	feed := func(i int) {
		k := i % nKeys
		e.Key, e.KeyGroup = keys[k], groups[k]
		e.Time = int64(i/nKeys)*everyMs + int64(k)*everyMs/int64(nKeys)
		vals[0] = float64(i % 50)
		op.Process(&e, &out)
		if k == nKeys-1 {
			op.AdvanceWatermark(e.Time-2000, &out)
			out.Reset()
		}
	}
	// Warm up past several window ends so every buffer reaches steady state.
	warm := 0
	for ; int64(warm/nKeys)*everyMs < 400_000; warm++ {
		feed(warm)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	i := warm
	for b.Loop() {
		feed(i)
		i++
	}
	// CPU time, not wall time: on a shared machine the wall clock also
	// counts time the benchmark spent descheduled.
	b.ReportMetric(float64(b.N)/(processCPU()-cpu0).Seconds(), "readings/cpu-s")
}

// 10k keys with one reading per key per second (a typical sensor rate), and
// with one per 10 s (sparse: every reading opens a window and every window
// fires with few readings, the costly case for sliding windows).
func BenchmarkOperator_Tumbling60s(b *testing.B) {
	benchOperator(b, Tumbling(60_000, 0, true), 10_000, 1000)
}

func BenchmarkOperator_Tumbling60sSparse(b *testing.B) {
	benchOperator(b, Tumbling(60_000, 0, true), 10_000, 10_000)
}

func BenchmarkOperator_Sliding60s10s(b *testing.B) {
	benchOperator(b, Sliding(60_000, 10_000, 0, true), 10_000, 1000)
}

func BenchmarkOperator_Tumbling60sBolt(b *testing.B) {
	benchOperatorBolt(b, Tumbling(60_000, 0, true), 10_000, 1000)
}

func BenchmarkOperator_Sliding60s10sBolt(b *testing.B) {
	benchOperatorBolt(b, Sliding(60_000, 10_000, 0, true), 10_000, 1000)
}

func BenchmarkOperator_Sliding60s10sSparse(b *testing.B) {
	benchOperator(b, Sliding(60_000, 10_000, 0, true), 10_000, 10_000)
}

// Gap 30 s: sessions grow on every reading and never close.
func BenchmarkOperator_Session30s(b *testing.B) {
	benchOperator(b, Session(30_000, true), 10_000, 10_000)
}

// Gap 5 s with a reading per key every 10 s: every reading opens a session
// and every session fires alone.
func BenchmarkOperator_Session5sChurn(b *testing.B) {
	benchOperator(b, Session(5_000, true), 10_000, 10_000)
}

func BenchmarkOperator_CountSliding(b *testing.B) {
	benchOperator(b, CountSliding(10, 5), 10_000, 1000)
}

// processCPU returns the user+system CPU time of the process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
