package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestState_Snapshot_RoundTrip(t *testing.T) {
	for _, msgs := range [][]string{
		nil,
		{`{"threshold":{"d1":30,"d2":31.5},"paused":false,"site":"plant-7"}`},
		{`{"cal":{"d1":{"offset":-0.25,"gain":1.01}},"tags":["a",{"z":1,"a":[]}],"e":{}}`},
		{`{"s":"\u0000\u001f\"\\/<>&\u2028é"}`, `{"n":1e-300,"m":-1.7976931348623157e308}`},
	} {
		s := New()
		mustApply(t, s, msgs...)
		snap := s.Snapshot()
		if !json.Valid(snap) {
			t.Fatalf("snapshot is not JSON: %s", snap)
		}
		r := NewWithLimits(Limits{MaxKeys: 10})
		mustApply(t, r, `{"old":1}`)
		v := r.Version()
		if err := r.Restore(snap); err != nil {
			t.Fatalf("Restore(%s): %v", snap, err)
		}
		if got := r.Snapshot(); !bytes.Equal(got, snap) {
			t.Fatalf("restored %s, want %s", got, snap)
		}
		if r.Version() <= v {
			t.Fatalf("Restore did not advance the version")
		}
		checkCounts(t, r)
		if r.Keys() != s.Keys() || r.Bytes() != s.Bytes() {
			t.Fatalf("restored counts %d/%d, want %d/%d", r.Keys(), r.Bytes(), s.Keys(), s.Bytes())
		}
	}
}

// TestState_Snapshot_StringText pins how strings appear in the canonical
// text: U+2028 and U+2029 escaped (package jsontext); an invalid UTF-8 byte
// in a message is read as U+FFFD and written as that character. A snapshot
// from before the escaping, with U+2028 and U+2029 raw, restores to the same
// state and text.
func TestState_Snapshot_StringText(t *testing.T) {
	s := New()
	mustApply(t, s, "{\"note\":\"a\u2028b\",\"bad\":\"x\xffy\",\"list\":[\"c\u2029d\"]}")
	want := `{"bad":"x` + "\ufffd" + `y","list":["c\u2029d"],"note":"a\u2028b"}`
	if got := string(s.Snapshot()); got != want {
		t.Fatalf("snapshot %s, want %s", got, want)
	}
	old := New()
	if err := old.Restore([]byte("{\"bad\":\"x\ufffdy\",\"list\":[\"c\u2029d\"],\"note\":\"a\u2028b\"}")); err != nil {
		t.Fatal(err)
	}
	if got := string(old.Snapshot()); got != want {
		t.Fatalf("snapshot of the raw form %s, want %s", got, want)
	}
}

// TestState_Snapshot_Deterministic builds one state through messages in
// different orders (of disjoint keys) and checks the bytes are equal:
// Go's map order must not leak into checkpoints.
func TestState_Snapshot_Deterministic(t *testing.T) {
	var msgs []string
	for i := range 200 {
		msgs = append(msgs, fmt.Sprintf(`{"t":{"dev-%03d":%d},"o":{"k%d":{"x%d":"%d"}}}`, i, i, i%17, i, i))
	}
	var want []byte
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		rng.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
		s := New()
		mustApply(t, s, msgs...)
		got := s.Snapshot()
		if want == nil {
			want = got
			continue
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("snapshots differ:\n%s\n%s", got, want)
		}
	}
}

func TestState_Restore_Errors(t *testing.T) {
	s := New()
	mustApply(t, s, `{"a":1}`)
	v := s.Version()
	for _, tc := range []struct {
		data string
		want error
	}{
		{`{"a":`, ErrMalformed},
		{`[]`, ErrMalformed},
		{`{"a":1,"b":2,"c":3}`, ErrLimit},
	} {
		small := NewWithLimits(Limits{MaxKeys: 2})
		mustApply(t, small, `{"a":1}`)
		for _, st := range []*State{s, small} {
			if tc.want == ErrLimit && st == s {
				continue
			}
			err := st.Restore([]byte(tc.data))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Restore(%s) = %v, want %v", tc.data, err, tc.want)
			}
			if got := string(st.Snapshot()); got != `{"a":1}` {
				t.Fatalf("failed Restore changed the state to %s", got)
			}
		}
	}
	if s.Version() != v {
		t.Fatalf("failed Restore changed the version")
	}
}

func TestState_Restore_DropsNulls(t *testing.T) {
	s := New()
	if err := s.Restore([]byte(`{"a":null,"b":{"c":null}}`)); err != nil {
		t.Fatal(err)
	}
	if got := string(s.Snapshot()); got != `{"b":{}}` {
		t.Fatalf("state %s", got)
	}
}
