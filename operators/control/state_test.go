package control

import (
	"errors"
	"strings"
	"testing"
)

// mustApply applies msgs in order, failing the test on any error.
func mustApply(tb testing.TB, s *State, msgs ...string) {
	tb.Helper()
	for _, m := range msgs {
		if err := s.Apply([]byte(m)); err != nil {
			tb.Fatalf("Apply(%s): %v", m, err)
		}
	}
}

// checkCounts recounts keys and bytes from the tree: the running counts
// Apply keeps must match.
func checkCounts(tb testing.TB, s *State) {
	tb.Helper()
	keys, bytes := s.root.size()
	if keys != s.Keys() || bytes != s.Bytes() {
		tb.Fatalf("counts: Keys()=%d Bytes()=%d, tree has %d keys, %d bytes", s.Keys(), s.Bytes(), keys, bytes)
	}
}

// TestState_Apply_Merge pins RFC 7386 merge semantics.
func TestState_Apply_Merge(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before []string
		msg    string
		want   string
	}{
		{"empty message", nil, `{}`, `{}`},
		{"first leaf", nil, `{"threshold":30}`, `{"threshold":30}`},
		{"objects merge key by key", []string{`{"threshold":{"d1":30}}`}, `{"threshold":{"d2":31}}`, `{"threshold":{"d1":30,"d2":31}}`},
		{"leaf replaces leaf", []string{`{"t":{"d1":30}}`}, `{"t":{"d1":"high"}}`, `{"t":{"d1":"high"}}`},
		{"leaf replaces object", []string{`{"t":{"d1":30}}`}, `{"t":5}`, `{"t":5}`},
		{"object replaces leaf", []string{`{"t":5}`}, `{"t":{"d1":1}}`, `{"t":{"d1":1}}`},
		{"array replaces array", []string{`{"a":[1,2,3]}`}, `{"a":[4]}`, `{"a":[4]}`},
		{"array replaces object", []string{`{"a":{"x":1}}`}, `{"a":[{"x":2}]}`, `{"a":[{"x":2}]}`},
		{"null deletes", []string{`{"t":{"d1":30,"d2":31}}`}, `{"t":{"d1":null}}`, `{"t":{"d2":31}}`},
		{"null deletes subtree", []string{`{"t":{"d1":30},"u":1}`}, `{"t":null}`, `{"u":1}`},
		{"null on absent key", []string{`{"u":1}`}, `{"t":null,"u":{"x":null}}`, `{"u":{}}`},
		{"null inside new object dropped", nil, `{"t":{"d1":null,"d2":2}}`, `{"t":{"d2":2}}`},
		{"empty object creates", nil, `{"t":{}}`, `{"t":{}}`},
		{"empty object keeps", []string{`{"t":{"a":1}}`}, `{"t":{}}`, `{"t":{"a":1}}`},
		{"null inside array kept", nil, `{"a":[null,true,"x",{"b":1,"a":null}]}`, `{"a":[null,true,"x",{"a":null,"b":1}]}`},
		{"bools and strings", nil, `{"on":true,"off":false,"s":"a\"b\\c\n\u0001é"}`, `{"off":false,"on":true,"s":"a\"b\\c\n\u0001é"}`},
		{"numbers canonical", nil, `{"a":1.50,"b":-0,"c":1e21,"d":1e-7,"e":123456789012,"f":0.000001}`, `{"a":1.5,"b":-0,"c":1e+21,"d":1e-7,"e":123456789012,"f":0.000001}`},
		{"duplicate key: last wins", nil, `{"a":1,"a":2}`, `{"a":2}`},
		{"deep merge", []string{`{"a":{"b":{"c":1,"d":2}}}`}, `{"a":{"b":{"c":null,"e":3}}}`, `{"a":{"b":{"d":2,"e":3}}}`},
		{"keys need not be identifiers", nil, `{"dev-1.x":{"":1}}`, `{"dev-1.x":{"":1}}`},
		{"surrounding space", nil, " \n{\"a\" : 1 }\n ", `{"a":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			mustApply(t, s, tc.before...)
			v := s.Version()
			mustApply(t, s, tc.msg)
			if got := string(s.Snapshot()); got != tc.want {
				t.Fatalf("state %s, want %s", got, tc.want)
			}
			if s.Version() != v+1 {
				t.Fatalf("version %d after Apply, want %d", s.Version(), v+1)
			}
			checkCounts(t, s)
			// RFC 7386 patches are idempotent.
			mustApply(t, s, tc.msg)
			if got := string(s.Snapshot()); got != tc.want {
				t.Fatalf("after applying again: %s, want %s", got, tc.want)
			}
		})
	}
}

func TestState_Apply_Errors(t *testing.T) {
	deep := strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1)
	deepArray := `{"a":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + "}"
	okDeep := strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth)
	for _, tc := range []struct {
		name   string
		limits Limits
		msg    string
		want   error
		detail string
	}{
		{"empty", Limits{}, ``, ErrMalformed, "empty"},
		{"syntax", Limits{}, `{"a":}`, ErrMalformed, "byte"},
		{"truncated", Limits{}, `{"a":1`, ErrMalformed, "truncated"},
		{"trailing data", Limits{}, `{"a":1} {}`, ErrMalformed, "data after"},
		{"trailing garbage", Limits{}, `{"a":1} x`, ErrMalformed, "invalid"},
		{"array", Limits{}, `[1]`, ErrMalformed, "got an array"},
		{"number", Limits{}, `42`, ErrMalformed, "got a number"},
		{"null", Limits{}, `null`, ErrMalformed, "got null"},
		{"number out of range", Limits{}, `{"a":1e400}`, ErrMalformed, "64-bit float"},
		{"number out of range in array", Limits{}, `{"a":[1e400]}`, ErrMalformed, "64-bit float"},
		{"too deep", Limits{}, deep, ErrMalformed, "deeper than 32"},
		{"too deep array", Limits{}, deepArray, ErrMalformed, "deeper than 32"},
		{"too many keys", Limits{MaxKeys: 3}, `{"t":{"a":1,"b":2,"c":3}}`, ErrLimit, "4 keys, over the limit of 3"},
		{"too many bytes", Limits{MaxBytes: 10}, `{"name":"0123456"}`, ErrLimit, "11 bytes, over the limit of 10"},
		{"max depth is fine", Limits{}, okDeep, nil, ""},
		{"exactly at the key limit", Limits{MaxKeys: 4}, `{"t":{"a":1,"b":2,"c":3}}`, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewWithLimits(tc.limits)
			before := string(s.Snapshot())
			v := s.Version()
			err := s.Apply([]byte(tc.msg))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("Apply(%q) = %v, want %v with %q", tc.msg, err, tc.want, tc.detail)
			}
			if got := string(s.Snapshot()); got != before || s.Version() != v {
				t.Fatalf("failed Apply changed the state: %s, version %d", got, s.Version())
			}
		})
	}
}

// TestState_Apply_LimitCountsTheResult checks that the limits judge the
// state after the merge: replacing and deleting free room.
func TestState_Apply_LimitCountsTheResult(t *testing.T) {
	s := NewWithLimits(Limits{MaxKeys: 3, MaxBytes: 100})
	mustApply(t, s, `{"t":{"a":1,"b":2}}`)                            // 3 keys
	mustApply(t, s, `{"t":{"a":5}}`)                                  // replaces: still 3
	mustApply(t, s, `{"t":{"a":null,"c":3}}`)                         // one out, one in
	if err := s.Apply([]byte(`{"u":1}`)); !errors.Is(err, ErrLimit) { // a 4th
		t.Fatalf("Apply over the limit: %v", err)
	}
	mustApply(t, s, `{"t":null,"u":{"x":1,"y":2}}`) // t's 3 keys out, 3 in
	if got, want := string(s.Snapshot()), `{"u":{"x":1,"y":2}}`; got != want {
		t.Fatalf("state %s, want %s", got, want)
	}
	checkCounts(t, s)
	if s.Keys() != 3 || s.Bytes() != 3 {
		t.Fatalf("Keys()=%d Bytes()=%d, want 3 and 3", s.Keys(), s.Bytes())
	}
}

func TestNewWithLimits_Defaults(t *testing.T) {
	l := New().Limits()
	if l.MaxKeys != DefaultMaxKeys || l.MaxBytes != DefaultMaxBytes {
		t.Fatalf("default limits %+v", l)
	}
}
