package ingest

import (
	"bytes"
	"testing"
)

func msg(topic, payload string, flags Flags, arrival int64) Entry {
	return Entry{Topic: []byte(topic), Payload: []byte(payload), Flags: flags, Arrival: arrival}
}

// jsonID is a toy dedup_key extractor: the bytes after `"id":` up to the
// next comma or brace.
func jsonID(topic, payload []byte) ([]byte, bool) {
	i := bytes.Index(payload, []byte(`"id":`))
	if i < 0 {
		return nil, false
	}
	rest := payload[i+5:]
	if j := bytes.IndexAny(rest, ",}"); j >= 0 {
		return rest[:j], true
	}
	return rest, true
}

func TestDedup_Observe(t *testing.T) {
	type step struct {
		e       Entry
		wantDup bool
	}
	tests := []struct {
		name  string
		opts  DedupOptions
		steps []step
	}{
		{"redelivery with DUP is dropped", DedupOptions{}, []step{
			{msg("a", "1", 0, 1), false},
			{msg("a", "1", FlagDup, 2), true},
		}},
		{"repeat without DUP is new data", DedupOptions{}, []step{
			{msg("a", "1", 0, 1), false},
			{msg("a", "1", 0, 2), false},
		}},
		{"DUP of something never seen is kept", DedupOptions{}, []step{
			{msg("a", "1", FlagDup, 1), false},
			{msg("a", "1", FlagDup, 2), true}, // and then remembered
		}},
		{"same payload on another topic is not a duplicate", DedupOptions{}, []step{
			{msg("a", "1", 0, 1), false},
			{msg("b", "1", FlagDup, 2), false},
		}},
		{"topic/payload boundary is part of the identity", DedupOptions{}, []step{
			{msg("ab", "c", 0, 1), false},
			{msg("a", "bc", FlagDup, 2), false},
		}},
		{"window by count forgets the oldest", DedupOptions{Window: 2}, []step{
			{msg("a", "1", 0, 1), false},
			{msg("a", "2", 0, 2), false},
			{msg("a", "3", 0, 3), false},
			{msg("a", "1", FlagDup, 4), false},
			{msg("a", "3", FlagDup, 5), true},
		}},
		{"duplicate hashes are counted, not overwritten", DedupOptions{Window: 3}, []step{
			{msg("a", "1", 0, 1), false},
			{msg("a", "1", 0, 2), false},
			{msg("a", "2", 0, 3), false},
			{msg("a", "3", 0, 4), false}, // forgets the first "1"; the second remains
			{msg("a", "1", FlagDup, 5), true},
		}},
		{"a redelivery burst after a quiet window still finds every remembered entry", DedupOptions{Window: 2}, []step{
			{msg("a", "1", 0, 1), false},
			{msg("a", "1", FlagDup, 2), true}, // lookups start
			{msg("a", "2", 0, 3), false},
			{msg("a", "3", 0, 4), false},
			{msg("a", "4", 0, 5), false}, // a window without a redelivery: lookups stop
			{msg("a", "5", 0, 6), false},
			{msg("a", "4", FlagDup, 7), true}, // and start again from the ring
			{msg("a", "5", FlagDup, 8), true},
			{msg("a", "3", FlagDup, 9), false}, // forgotten: the window is 2
		}},
		{"window by time forgets old arrivals", DedupOptions{WindowMs: 1000}, []step{
			{msg("a", "1", 0, 1000), false},
			{msg("a", "2", 0, 1500), false},
			{msg("a", "1", FlagDup, 2000), true},
			{msg("a", "1", FlagDup, 2001), false}, // 1000 < 2001-1000
			{msg("a", "2", FlagDup, 2400), true},
		}},
		{"dedup_key catches a re-send without DUP", DedupOptions{Key: jsonID}, []step{
			{msg("a", `{"id":7,"t":1}`, 0, 1), false},
			{msg("a", `{"id":7,"t":1}`, 0, 2), true},
			{msg("a", `{"id":8,"t":1}`, 0, 3), false},
			{msg("b", `{"id":7,"t":1}`, 0, 4), false},
		}},
		{"dedup_key: messages without an id fall back to DUP", DedupOptions{Key: jsonID}, []step{
			{msg("a", `{"t":1}`, 0, 1), false},
			{msg("a", `{"t":1}`, 0, 2), false},
			{msg("a", `{"t":1}`, FlagDup, 3), true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDedup(tt.opts)
			for i, s := range tt.steps {
				if got := d.Observe(&s.e); got != s.wantDup {
					t.Fatalf("step %d (%s %s flags %d): duplicate %v, want %v", i, s.e.Topic, s.e.Payload, s.e.Flags, got, s.wantDup)
				}
			}
		})
	}
}

// TestDedup_Load rebuilds the filter from the log after a restart: a
// redelivery of a message appended by the previous process is dropped.
func TestDedup_Load(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{SegmentBytes: 1 << 10, MaxDiskBytes: 1 << 20})
	mustAppend(t, l, 50, 7)
	l.Close()

	l = mustOpen(t, dir, Options{SegmentBytes: 1 << 10, MaxDiskBytes: 1 << 20})
	defer l.Close()
	d := NewDedup(DedupOptions{Window: 20})
	if err := d.Load(l); err != nil {
		t.Fatal(err)
	}
	if d.Len() != 20 {
		t.Fatalf("remembered %d entries, want the last 20", d.Len())
	}
	// Newest first: a miss is remembered and would push older ones out.
	for off := uint64(50); off >= 1; off-- {
		e := testEntry(off)
		e.Flags |= FlagDup
		want := off > 30
		if got := d.Observe(&e); got != want {
			t.Fatalf("redelivery of %d: duplicate %v, want %v", off, got, want)
		}
	}
}

func TestDedup_Observe_NoAlloc(t *testing.T) {
	d := NewDedup(DedupOptions{Window: 1024, Key: jsonID})
	entries := make([]Entry, 4096)
	for i := range entries {
		entries[i] = testEntry(uint64(i + 1))
	}
	for i := range entries { // warm the table to its steady size
		d.Observe(&entries[i])
	}
	i := 0
	allocs := testing.AllocsPerRun(4000, func() {
		d.Observe(&entries[i%len(entries)])
		i++
	})
	if allocs > 0.01 {
		t.Fatalf("Observe allocates %.3f times per message", allocs)
	}
}
