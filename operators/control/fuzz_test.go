package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// fuzzBase is the state every FuzzApply input is merged into.
const fuzzBase = `{"threshold":{"d1":30,"d2":31},"cal":{"d1":{"offset":0.5}},"tags":[1,2],"on":true,"name":"x"}`

// refMerge is RFC 7386's MergePatch pseudo-code over encoding/json
// values, an independent model to compare Apply with.
func refMerge(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = refMerge(t[k], v)
	}
	return t
}

func decodeJSON(tb testing.TB, data []byte) any {
	tb.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		tb.Fatalf("decode %s: %v", data, err)
	}
	return v
}

// FuzzApply merges arbitrary payloads into a state and checks: errors are
// ErrMalformed or ErrLimit and change nothing; a success equals RFC 7386's
// merge, keeps the running counts and the limits, snapshots to valid JSON
// that restores to the same bytes, and is idempotent.
func FuzzApply(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"threshold":{"d3":29}}`,
		`{"threshold":{"d1":null},"cal":null}`,
		`{"threshold":5,"tags":{"a":[null]}}`,
		`{"on":{"x":{"y":{"z":"deep"}}}}`,
		`{"s":"esc\"\\\n\u0000é\ud800","n":-0,"e":1e-7,"big":1e308}`,
		`{"a":1,"a":{"b":2}}`,
		`{"a":[[[{"b":[{"c":null}]}]]]}`,
		`{"a":1e400}`,
		`[1,2]`,
		`{"a":1}{"b":2}`,
		`{"a":`,
		`not json`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, limits := range []Limits{{}, {MaxKeys: 12, MaxBytes: 80}} {
			s := NewWithLimits(limits)
			mustApply(t, s, fuzzBase)
			before := s.Snapshot()
			err := s.Apply(payload)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrLimit) {
					t.Fatalf("Apply error %v is neither ErrMalformed nor ErrLimit", err)
				}
				if !bytes.Equal(s.Snapshot(), before) {
					t.Fatalf("failed Apply changed the state")
				}
				continue
			}
			snap := s.Snapshot()
			if !json.Valid(snap) {
				t.Fatalf("snapshot is not JSON: %s", snap)
			}
			want := refMerge(decodeJSON(t, []byte(fuzzBase)), decodeJSON(t, payload))
			if got := decodeJSON(t, snap); !reflect.DeepEqual(got, want) {
				t.Fatalf("Apply(%s) gave %s, RFC 7386 gives %v", payload, snap, want)
			}
			checkCounts(t, s)
			if s.Keys() > s.Limits().MaxKeys || s.Bytes() > s.Limits().MaxBytes {
				t.Fatalf("state over its limits: %d keys, %d bytes", s.Keys(), s.Bytes())
			}
			r := NewWithLimits(limits)
			if err := r.Restore(snap); err != nil {
				t.Fatalf("Restore(%s): %v", snap, err)
			}
			if got := r.Snapshot(); !bytes.Equal(got, snap) {
				t.Fatalf("restored %s, want %s", got, snap)
			}
			if err := s.Apply(payload); err != nil {
				t.Fatalf("second Apply: %v", err)
			}
			if got := s.Snapshot(); !bytes.Equal(got, snap) {
				t.Fatalf("not idempotent: %s, then %s", snap, got)
			}
		}
	})
}
