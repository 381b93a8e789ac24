package state_test

import (
	"fmt"
	"time"

	"github.com/eddy-edge/eddy/state"
)

// A keyed operator's states: set the key (and window) per reading, then
// read and write; at a barrier, filter the snapshot for expired values.
func ExampleKeyedContext() {
	be := state.NewMemory() // or state.OpenBolt(path, state.BoltOptions{CacheBytes: 32 << 20})
	clock := int64(1_700_000_000_000)
	kc, _ := state.NewKeyedContext(be, "temp_1m", state.KeyedOptions{Now: func() int64 { return clock }})
	count, _ := state.NewValueState(kc, "count", state.Int64Codec{}, state.TTLConfig{})
	last, _ := state.NewValueState(kc, "last", state.Float64Codec{}, state.TTLConfig{
		TTL: time.Hour, Update: state.OnCreateAndWrite, Visibility: state.NeverReturnExpired,
	})

	for _, r := range []struct {
		device string
		temp   float64
	}{{"a", 20.5}, {"b", 19}, {"a", 21}} {
		key := []byte(r.device)
		kc.SetCurrentKey(state.KeyGroup(key, state.DefaultMaxKeyGroups), key)
		kc.SetNamespace([]byte("window-0"))
		n, _, _ := count.Value()
		count.Update(n + 1)
		last.Update(r.temp)
	}

	kc.SetCurrentKey(state.KeyGroup([]byte("a"), state.DefaultMaxKeyGroups), []byte("a"))
	n, _, _ := count.Value()
	t, _, _ := last.Value()
	fmt.Println(n, t)

	clock += time.Hour.Milliseconds() // the TTL passes
	_, ok, _ := last.Value()
	fmt.Println(ok)

	kc.Cleanup(1000) // bounded background cleanup, e.g. per batch
	snap, _ := be.Snapshot(true)
	defer snap.Close()
	_ = kc.FilterSnapshot(snap) // write these entries to the checkpoint
	// Output:
	// 2 21
	// false
}
