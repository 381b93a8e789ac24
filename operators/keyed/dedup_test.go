package keyed

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/state"
)

// dedupRunner keeps the entries of one key's ids in a map, as the host's
// MapState does.
type dedupRunner struct {
	b       Dedup
	entries map[string]DedupEntry
}

func init() {
	newBlockRunner["dedup"] = func(fs []string) (blockRunner, error) {
		opts, err := parseOpts(fs, "within", "time")
		if err != nil {
			return nil, err
		}
		r := &dedupRunner{entries: map[string]DedupEntry{}}
		if r.b.WithinMs, err = optMs(opts, "within"); err != nil {
			return nil, err
		}
		if r.b.Time, err = parseDomain(opts["time"], EventTimeDomain); err != nil {
			return nil, err
		}
		return r, r.b.Validate()
	}
}

func (r *dedupRunner) reading(at At, args []string, _ func(Signal)) (int64, string, error) {
	if len(args) != 1 {
		return 0, "", fmt.Errorf("dedup reading takes one id, got %v", args)
	}
	e, found := r.entries[args[0]]
	before := e
	if !r.b.OnReading(&e, found, at) {
		if e != before {
			return 0, "", fmt.Errorf("a dropped reading changed the entry from %+v to %+v", before, e)
		}
		return NoTimer, "drop", nil
	}
	r.entries[args[0]] = e
	return NoTimer, "pass", nil
}

func (r *dedupRunner) timer(int64, func(Signal)) (int64, error) {
	return 0, errors.New("dedup has no timer")
}

func (r *dedupRunner) domain() TimeDomain { return r.b.Time }

func (r *dedupRunner) roundTrip() error {
	for id, e := range r.entries {
		dec, err := roundTrip(DedupCodec{}, e)
		if err != nil {
			return err
		}
		r.entries[id] = dec
	}
	return nil
}

func TestDedup_Scenarios(t *testing.T) {
	runBlockScenarios(t, "testdata/blocks/dedup.txt", "dedup")
}

// TestDedup_MatchesStateTTL runs readings through the block with its
// entries in a real state.MapState whose TTL is Within, OnCreateAndWrite,
// NeverReturnExpired, its clock reading the block's domain, and through the
// block with entries in a plain map: the state's TTL and the block's rule
// must agree on every reading, including at the exact expiry. The other
// domain's time is garbage, which the block must not read.
func TestDedup_MatchesStateTTL(t *testing.T) {
	for _, domain := range []TimeDomain{EventTimeDomain, ProcessingTimeDomain} {
		t.Run(domain.String(), func(t *testing.T) { testDedupMatchesStateTTL(t, domain) })
	}
}

func testDedupMatchesStateTTL(t *testing.T, domain TimeDomain) {
	const within = int64(time.Hour / time.Millisecond)
	d := Dedup{WithinMs: within, Time: domain}
	var now int64
	kc, err := state.NewKeyedContext(state.NewMemory(), "dedup", state.KeyedOptions{Now: func() int64 { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := state.NewMapState(kc, "seen", state.StringCodec{}, DedupCodec{}, state.TTLConfig{
		TTL: time.Hour, Update: state.OnCreateAndWrite, Visibility: state.NeverReturnExpired,
	})
	if err != nil {
		t.Fatal(err)
	}
	plain := map[string]map[string]DedupEntry{}
	type reading struct {
		now     int64
		key, id string
	}
	var readings []reading
	// Two keys, three ids, readings at steps that land before, on and
	// after expiries.
	steps := []int64{0, within / 3, within / 3, within / 3, 1, within/3 - 1, within - 1, 1, within}
	for _, step := range steps {
		now += step
		for _, key := range []string{"k1", "k2"} {
			for _, id := range []string{"a", "b", "c"} {
				if key == "k2" && id == "c" && now > within {
					continue // a key whose id stops repeating
				}
				readings = append(readings, reading{now: now, key: key, id: id})
			}
		}
	}
	passes := 0
	for i, r := range readings {
		now = r.now
		at := At{Event: now, Proc: -7 * now}
		if domain == ProcessingTimeDomain {
			at = At{Event: 12345 - now, Proc: now}
		}
		kc.SetCurrentKey(state.KeyGroup([]byte(r.key), 128), []byte(r.key))
		e, found, err := ms.Get(r.id)
		if err != nil {
			t.Fatal(err)
		}
		viaState := d.OnReading(&e, found, at)
		if viaState {
			if err := ms.Put(r.id, e); err != nil {
				t.Fatal(err)
			}
		}
		m := plain[r.key]
		if m == nil {
			m = map[string]DedupEntry{}
			plain[r.key] = m
		}
		pe, pfound := m[r.id]
		viaBlock := d.OnReading(&pe, pfound, at)
		if viaBlock {
			m[r.id] = pe
			passes++
		}
		if viaState != viaBlock {
			t.Fatalf("reading %d (%s/%s at %d): with state TTL pass=%v, by the block's rule pass=%v", i, r.key, r.id, now, viaState, viaBlock)
		}
	}
	// The readings come at 0, 20m, 40m, 1h, 1h+1ms, 1h20m, 2h20m−1ms, 2h20m
	// and 3h20m: an id read every time passes at 0, 1h (the exact expiry),
	// 2h20m−1ms and 3h20m, 4 times; k2's c, read until 1h, passes twice.
	if want := 4*3 + 4*2 + 2; passes != want {
		t.Fatalf("%d passes, want %d", passes, want)
	}
}

func TestDedup_Expiry(t *testing.T) {
	d := Dedup{WithinMs: 1000, Time: EventTimeDomain}
	for _, tc := range []struct{ seen, want int64 }{{0, 1000}, {-5000, -4000}, {math.MaxInt64 - 10, math.MaxInt64}} {
		if got := d.Expiry(DedupEntry{Seen: tc.seen}); got != tc.want {
			t.Errorf("Expiry(%d) = %d, want %d", tc.seen, got, tc.want)
		}
		// The entry drops repeats until Expiry and not from it.
		e := DedupEntry{Seen: tc.seen}
		if tc.want < math.MaxInt64 && (d.OnReading(&e, true, At{Event: tc.want - 1}) || !d.OnReading(&e, true, At{Event: tc.want})) {
			t.Errorf("seen %d: the entry does not expire exactly at %d", tc.seen, tc.want)
		}
	}
}

func TestDedupCodec_Corrupt(t *testing.T) {
	checkCorrupt(t, DedupCodec{}, DedupCodec{}.Append(nil, DedupEntry{Seen: 77}), nil)
}

func FuzzDedupCodec_Decode(f *testing.F) {
	f.Add(DedupCodec{}.Append(nil, DedupEntry{}))
	f.Add(DedupCodec{}.Append(nil, DedupEntry{Seen: 1_795_946_400_000}))
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, DedupCodec{}, b) })
}

// BenchmarkDedup: one reading whose id repeats once (half the readings are
// repeats), the entry found as the host's MapState would return it.
func BenchmarkDedup(b *testing.B) {
	d := Dedup{WithinMs: 3_600_000, Time: EventTimeDomain}
	var e DedupEntry
	found := false
	var passes int
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			found = false // a new id
		}
		if d.OnReading(&e, found, At{Event: int64(i) * 1000}) {
			passes++
			found = true
		}
	}
	b.ReportMetric(float64(passes)/float64(b.N), "passes/op")
}
