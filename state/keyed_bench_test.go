package state

import (
	"fmt"
	"testing"
)

// hotValueState is a ValueState[int64] over 10k keys already in the cache.
func hotValueState(tb testing.TB, be Backend, ttl TTLConfig) (*KeyedContext, *ValueState[int64], [][]byte, []uint16) {
	kc, _ := NewKeyedContext(be, "op", KeyedOptions{Now: func() int64 { return 1_700_000_000_000 }})
	v, err := NewValueState(kc, "count", Int64Codec{}, ttl)
	if err != nil {
		tb.Fatal(err)
	}
	const hot = 10_000
	keys := make([][]byte, hot)
	kgs := make([]uint16, hot)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "sensor-%07d", i)
		kgs[i] = KeyGroup(keys[i], DefaultMaxKeyGroups)
		kc.SetCurrentKey(kgs[i], keys[i])
		v.Update(0)
	}
	return kc, v, keys, kgs
}

func hotStep(kc *KeyedContext, v *ValueState[int64], keys [][]byte, kgs []uint16, i int) error {
	j := i % len(keys)
	kc.SetCurrentKey(kgs[j], keys[j])
	n, _, err := v.Value()
	if err != nil {
		return err
	}
	return v.Update(n + 1)
}

// ValueState Value+Update of a hot key set through the bbolt cache: the
// per-reading path of a keyed operator. Target ≥ 5M ops/s/core, 0 allocs.
func BenchmarkValueState_HotGetUpdate(b *testing.B) {
	for _, bc := range []struct {
		name string
		ttl  TTLConfig
	}{
		{"plain", TTLConfig{}},
		{"ttl", ttlConfig(60_000, OnReadAndWrite, NeverReturnExpired)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			kc, v, keys, kgs := hotValueState(b, openTestBolt(b, BoltOptions{CacheBytes: 32 << 20}), bc.ttl)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := hotStep(kc, v, keys, kgs, i); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mops/s")
		})
	}
}

// The hot path allocates nothing through the bbolt cache, with or without
// TTL. (Memory.Put allocates the map key string on every overwrite; the
// typed layer adds nothing there either.)
func TestValueState_HotPathAllocs(t *testing.T) {
	for _, ttl := range []TTLConfig{{}, ttlConfig(60_000, OnReadAndWrite, NeverReturnExpired)} {
		for _, be := range []Backend{openTestBolt(t, BoltOptions{})} {
			kc, v, keys, kgs := hotValueState(t, be, ttl)
			i := 0
			allocs := testing.AllocsPerRun(1000, func() {
				if err := hotStep(kc, v, keys, kgs, i); err != nil {
					t.Fatal(err)
				}
				i++
			})
			if allocs != 0 {
				t.Errorf("%T ttl=%v: %.1f allocs per Value+Update", be, ttl.TTL, allocs)
			}
		}
	}
}
