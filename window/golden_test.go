package window

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/window/aggregate"
)

// update rewrites the golden state encodings: go test ./window/ -run TestGolden -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenStatePath holds the window state's encodings as snapshot files
// store them, one per line: a name, then the bytes in hex.
var goldenStatePath = filepath.Join("testdata", "golden-state.txt")

// goldenFuncs is every aggregate function, so the golden window state holds
// an accumulator of each.
var goldenFuncs = []aggregate.Func{aggregate.Count, aggregate.Sum, aggregate.Min, aggregate.Max, aggregate.Avg,
	aggregate.First, aggregate.Last, aggregate.Stddev, aggregate.Variance, aggregate.Median, aggregate.Percentile}

func goldenWindowState() *WindowState {
	st := &WindowState{Fired: 2, SinceFire: 5, NextEarly: 1_700_000_060_000, Accs: make([]aggregate.Acc, len(goldenFuncs))}
	for i, v := range []float64{21.5, -3.25, 0, math.NaN(), 1e6, 21.5} {
		for j, f := range goldenFuncs {
			st.Accs[j].Add(f, v, 1_700_000_000_000+int64(i)*1000, f == aggregate.Count)
		}
	}
	return st
}

// goldenEncodings are the encodings the golden file pins, by name.
func goldenEncodings() [][2]string {
	w := Window{Start: 1_700_000_000_000, End: 1_700_000_060_000}
	key := []byte("pump\x00-7")
	return [][2]string{
		{"window_state", hex.EncodeToString(AppendWindowState(nil, goldenFuncs, goldenWindowState()))},
		{"window_key", hex.EncodeToString(AppendWindowKey(nil, 300, key, w))},
		{"merging_set_key", hex.EncodeToString(AppendMergingSetKey(nil, 300, key))},
		{"count_key", hex.EncodeToString(AppendCountKey(nil, 300, key))},
		{"timer_key", hex.EncodeToString(AppendTimerKey(nil, EventTime, -5, 300, key, w))},
		{"windows", hex.EncodeToString(AppendWindows(nil, []Window{w, {Start: -60_000, End: 0}}))},
	}
}

// TestGolden_State: testdata/golden-state.txt holds the encodings of a
// window state (an accumulator of every function), its keys, a timer key
// and a merging window set, as this build writes them; each decodes to
// what it was made from. A difference means the encoding changed: bump
// windowStateVersion (for the value; a key layout has no version of its
// own and changing it needs a new state name) and run with -update. A
// golden window state of another version than windowStateVersion fails
// too, so a bump comes with a new golden file.
func TestGolden_State(t *testing.T) {
	encs := goldenEncodings()
	if *update {
		var b strings.Builder
		for _, e := range encs {
			fmt.Fprintf(&b, "%s %s\n", e[0], e[1])
		}
		if err := os.WriteFile(goldenStatePath, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.ReadFile(goldenStatePath)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	golden := map[string][]byte{}
	sc := bufio.NewScanner(bytes.NewReader(f))
	for sc.Scan() {
		name, h, ok := strings.Cut(sc.Text(), " ")
		b, err := hex.DecodeString(h)
		if !ok || err != nil {
			t.Fatalf("golden line %q", sc.Text())
		}
		golden[name] = b
	}
	if b := golden["window_state"]; len(b) == 0 || b[0] != windowStateVersion {
		t.Fatalf("golden window state is version %v, this build writes %d: run with -update to write the golden file of the new version", b[:min(len(b), 1)], windowStateVersion)
	}
	if accs := accsOf(golden["window_state"]); len(accs) == 0 || accs[0] != aggregate.EncodingVersion {
		t.Fatalf("golden accumulators are version %v, this build writes %d: run with -update to write the golden file of the new version", accs[:min(len(accs), 1)], aggregate.EncodingVersion)
	}
	for _, e := range encs {
		if got, want := e[1], hex.EncodeToString(golden[e[0]]); got != want {
			t.Errorf("%s: this build encodes\n%s\nthe golden file holds\n%s\nthe encoding changed: bump the version (windowStateVersion, aggregate.EncodingVersion) and run with -update",
				e[0], got, want)
		}
	}

	var st WindowState
	if err := DecodeWindowState(golden["window_state"], goldenFuncs, &st); err != nil {
		t.Fatal(err)
	}
	want := goldenWindowState()
	if st.Fired != want.Fired || st.SinceFire != want.SinceFire || st.NextEarly != want.NextEarly {
		t.Errorf("golden window state header %d %d %d, want %d %d %d", st.Fired, st.SinceFire, st.NextEarly, want.Fired, want.SinceFire, want.NextEarly)
	}
	for i, f := range goldenFuncs {
		got, w := st.Accs[i].Result(f, 0.9), want.Accs[i].Result(f, 0.9)
		if got != w && !(math.IsNaN(got) && math.IsNaN(w)) {
			t.Errorf("golden %v accumulator gives %v, want %v", f, got, w)
		}
		if st.Accs[i].N != want.Accs[i].N {
			t.Errorf("golden %v accumulator holds %d values, want %d", f, st.Accs[i].N, want.Accs[i].N)
		}
	}
	tm, err := ParseTimerKey(golden["timer_key"], nil)
	if err != nil {
		t.Fatal(err)
	}
	if wantT := (Timer{Domain: EventTime, Time: -5, KeyGroup: 300, Key: []byte("pump\x00-7"), Window: Window{Start: 1_700_000_000_000, End: 1_700_000_060_000}}); !reflect.DeepEqual(tm, wantT) {
		t.Errorf("golden timer key reads as %+v, want %+v", tm, wantT)
	}
	ws, err := DecodeWindows(golden["windows"], nil)
	if err != nil {
		t.Fatal(err)
	}
	if wantW := []Window{{Start: 1_700_000_000_000, End: 1_700_000_060_000}, {Start: -60_000, End: 0}}; !reflect.DeepEqual(ws, wantW) {
		t.Errorf("golden window set reads as %v, want %v", ws, wantW)
	}
}

// accsOf returns the accumulators' encoding in a window state's: what
// follows the version and the three counters.
func accsOf(b []byte) []byte {
	b = b[1:]
	for range 2 {
		_, k := binary.Uvarint(b)
		if k <= 0 {
			return nil
		}
		b = b[k:]
	}
	if _, k := binary.Varint(b); k > 0 {
		return b[k:]
	}
	return nil
}
