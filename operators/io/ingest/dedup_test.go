package ingest

import (
	"bytes"
	"fmt"
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

// dedupBatch is a run of readings r<from> … r<to−1> on topic "t", received
// from o, each expected to get verdict want. restart first closes the log
// and opens it again with a new Dedup that Loads it, as a new process
// would. Reading i arrives at i ms, plus at.
type dedupBatch struct {
	from, to int
	dup      bool
	o        Origin
	want     Verdict
	restart  bool
	at       int64
}

func conn(session uint16, n uint32, resumed bool) Origin {
	return Origin{Session: session, Conn: n, Resumed: resumed}
}

// observeAppend runs entries through d and l as the agent's intake does:
// Observe each, Append the kept ones in one batch, then Appended.
func observeAppend(t testing.TB, d *Dedup, l *Log, entries []Entry, origins func(i int) Origin) []Verdict {
	t.Helper()
	verdicts := make([]Verdict, len(entries))
	var kept []Entry
	for i := range entries {
		verdicts[i] = d.Observe(&entries[i], origins(i))
		if !verdicts[i].Dropped() {
			kept = append(kept, entries[i])
		}
	}
	if len(kept) > 0 {
		first, last, err := l.Append(kept)
		if err != nil {
			t.Fatal(err)
		}
		d.Appended(first, last)
	}
	return verdicts
}

func reading(i int, dup bool) Entry {
	e := Entry{Arrival: int64(i), Topic: []byte("t"), Payload: fmt.Appendf(nil, "r%08d", i)}
	if dup {
		e.Flags = FlagDup
	}
	return e
}

// runDedupBatches feeds the batches in chunks of 1,000 (the agent's commit
// size) and checks every verdict.
func runDedupBatches(t *testing.T, opts DedupOptions, batches []dedupBatch) (*Dedup, *Log) {
	t.Helper()
	dir := t.TempDir()
	lopts := Options{SegmentBytes: 4 << 20, MaxDiskBytes: 1 << 30}
	l := mustOpen(t, dir, lopts)
	d := NewDedup(opts)
	if err := d.Load(l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); d.Close() })
	// flagged is, per session, the connection whose first logged message
	// carries FlagResumed, as the agent's intake marks it.
	flagged := map[uint16]uint32{}
	for bi, b := range batches {
		if b.restart {
			clear(flagged)
			l.Close()
			d.Close()
			l = mustOpen(t, dir, lopts)
			d = NewDedup(opts)
			if err := d.Load(l); err != nil {
				t.Fatal(err)
			}
		}
		for at := b.from; at < b.to; at += 1000 {
			entries := make([]Entry, 0, 1000)
			for i := at; i < min(at+1000, b.to); i++ {
				e := reading(i, b.dup)
				e.Arrival += b.at
				entries = append(entries, e)
			}
			var kept []Entry
			var verdicts []Verdict
			for i := range entries {
				v := d.Observe(&entries[i], b.o)
				verdicts = append(verdicts, v)
				if v.Dropped() {
					continue
				}
				if b.o.Resumed && flagged[b.o.Session] != b.o.Conn {
					flagged[b.o.Session] = b.o.Conn
					entries[i].Flags |= FlagResumed
				}
				kept = append(kept, entries[i])
			}
			if len(kept) > 0 {
				first, last, err := l.Append(kept)
				if err != nil {
					t.Fatal(err)
				}
				d.Appended(first, last)
			}
			for i, v := range verdicts {
				if v != b.want {
					t.Fatalf("batch %d: r%08d (dup %v, %+v): %v, want %v", bi, at+i, b.dup, b.o, v, b.want)
				}
			}
		}
	}
	return d, l
}

func TestDedup_Rules(t *testing.T) {
	tests := []struct {
		name    string
		opts    DedupOptions
		batches []dedupBatch
	}{
		{"a DUP block far beyond 65,536 entries back is dropped", DedupOptions{}, []dedupBatch{
			{from: 0, to: 250_000, o: conn(0, 1, false), want: Keep},
			{from: 0, to: 120_000, dup: true, o: conn(0, 2, true), want: DropRedelivery},
			{from: 250_000, to: 250_010, o: conn(0, 2, true), want: Keep},
		}},
		{"a DUP message never logged is kept, counted unmatched, then known", DedupOptions{}, []dedupBatch{
			{from: 0, to: 10, want: Keep},
			{from: 100, to: 110, dup: true, want: KeepUnmatched},
			{from: 100, to: 110, dup: true, want: DropRedelivery},
		}},
		{"a DUP message older than the index bound is unmatched", DedupOptions{IndexMax: 1 << 16}, []dedupBatch{
			{from: 0, to: 200_000, want: Keep},
			{from: 0, to: 10, dup: true, want: KeepUnmatched},
			{from: 199_000, to: 200_000, dup: true, want: DropRedelivery},
		}},
		{"a repeat without DUP and without a resumed session is new data", DedupOptions{MaxInflight: 100}, []dedupBatch{
			{from: 0, to: 1000, o: conn(0, 1, false), want: Keep},
			{from: 950, to: 1000, o: conn(0, 2, false), want: Keep},
		}},
		{"a re-send without DUP inside the unacked tail is dropped after a resume", DedupOptions{MaxInflight: 100}, []dedupBatch{
			{from: 0, to: 1000, o: conn(0, 1, false), want: Keep},
			{from: 920, to: 1000, o: conn(0, 2, true), want: DropResend},
			{from: 1000, to: 1010, o: conn(0, 2, true), want: Keep},
		}},
		{"an identical payload outside the tail is kept", DedupOptions{MaxInflight: 100}, []dedupBatch{
			{from: 0, to: 1000, o: conn(0, 1, false), want: Keep},
			{from: 850, to: 900, o: conn(0, 2, true), want: Keep},
		}},
		{"each tail entry absorbs one re-send", DedupOptions{MaxInflight: 100}, []dedupBatch{
			{from: 0, to: 100, o: conn(0, 1, false), want: Keep},
			{from: 50, to: 100, o: conn(0, 2, true), want: DropResend},
			{from: 50, to: 60, o: conn(0, 2, true), want: Keep},
		}},
		{"a re-send behind many live messages is dropped", DedupOptions{MaxInflight: 10}, []dedupBatch{
			{from: 0, to: 10, o: conn(0, 1, false), want: Keep},
			{from: 100, to: 10_000, o: conn(0, 2, true), want: Keep},
			{from: 5, to: 10, o: conn(0, 2, true), want: DropResend},
		}},
		{"matching ends ResendSpanMs after the connection's last message", DedupOptions{MaxInflight: 10}, []dedupBatch{
			{from: 0, to: 10, o: conn(0, 1, false), want: Keep},
			{from: 100, to: 120, o: conn(0, 2, true), want: Keep},
			{from: 5, to: 10, o: conn(0, 2, true), at: ResendSpanMs + 10, want: Keep},
		}},
		{"re-sends still owed come back two connections later", DedupOptions{MaxInflight: 10}, []dedupBatch{
			{from: 0, to: 10, o: conn(0, 1, false), want: Keep},
			{from: 100, to: 110, o: conn(0, 2, true), want: Keep},
			{from: 0, to: 10, o: conn(0, 3, true), want: DropResend},
			{from: 100, to: 110, o: conn(0, 3, true), want: DropResend},
		}},
		{"re-sends still owed by connections before a restart are recognized", DedupOptions{MaxInflight: 10}, []dedupBatch{
			{from: 0, to: 20, o: conn(0, 1, false), want: Keep},
			{from: 100, to: 120, o: conn(0, 2, true), want: Keep},
			{from: 200, to: 220, o: conn(0, 3, true), want: Keep},
			{restart: true, from: 300, to: 320, o: conn(0, 1, true), want: Keep},
			{from: 110, to: 120, o: conn(0, 1, true), want: DropResend},
			{from: 10, to: 20, o: conn(0, 1, true), want: DropResend},
			{from: 0, to: 10, o: conn(0, 1, true), want: Keep},
			{from: 210, to: 220, o: conn(0, 1, true), want: DropResend},
		}},
		{"a DUP re-send uses up its tail entry", DedupOptions{MaxInflight: 100}, []dedupBatch{
			{from: 0, to: 100, o: conn(0, 1, false), want: Keep},
			{from: 0, to: 100, dup: true, o: conn(0, 2, true), want: DropRedelivery},
			{from: 0, to: 100, o: conn(0, 2, true), want: Keep},
		}},
		{"re-sends come back on the next connection when the last one ended early", DedupOptions{MaxInflight: 100}, []dedupBatch{
			{from: 0, to: 100, o: conn(0, 1, false), want: Keep},
			{from: 0, to: 40, o: conn(0, 2, true), want: DropResend},
			{from: 40, to: 100, o: conn(0, 3, true), want: DropResend},
			{from: 0, to: 40, o: conn(0, 4, true), want: DropResend},
		}},
		{"a shared subscription's sessions have their own tails", DedupOptions{MaxInflight: 100, Sessions: 2}, []dedupBatch{
			{from: 0, to: 100, o: conn(0, 1, false), want: Keep},
			{from: 100, to: 200, o: conn(1, 1, false), want: Keep},
			{from: 150, to: 200, o: conn(0, 2, true), want: Keep},
			{from: 150, to: 200, o: conn(1, 2, true), want: DropResend},
		}},
		{"a restart rebuilds the index from the log", DedupOptions{}, []dedupBatch{
			{from: 0, to: 100_000, o: conn(0, 1, false), want: Keep},
			{restart: true, from: 0, to: 100_000, dup: true, o: conn(0, 1, true), want: DropRedelivery},
		}},
		{"a restart rebuilds the tail from the log", DedupOptions{MaxInflight: 100}, []dedupBatch{
			{from: 0, to: 1000, o: conn(0, 1, false), want: Keep},
			{restart: true, from: 900, to: 1000, o: conn(0, 1, true), want: DropResend},
			{from: 800, to: 900, o: conn(0, 1, true), want: Keep},
		}},
		{"after a restart without a resumed session nothing is a re-send", DedupOptions{MaxInflight: 100}, []dedupBatch{
			{from: 0, to: 1000, o: conn(0, 1, false), want: Keep},
			{restart: true, from: 900, to: 1000, o: conn(0, 1, false), want: Keep},
		}},
		{"the restart tail spans every session of a shared subscription", DedupOptions{MaxInflight: 100, Sessions: 2}, []dedupBatch{
			{from: 0, to: 1000, o: conn(0, 1, false), want: Keep},
			{restart: true, from: 800, to: 900, o: conn(1, 1, true), want: DropResend},
			{from: 900, to: 1000, o: conn(0, 1, true), want: DropResend},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runDedupBatches(t, tt.opts, tt.batches) })
	}
}

func TestDedup_Key(t *testing.T) {
	type step struct {
		e    Entry
		want Verdict
	}
	tests := []struct {
		name  string
		opts  DedupOptions
		steps []step
	}{
		{"dedup_key catches a re-send without DUP", DedupOptions{Key: jsonID}, []step{
			{msg("a", `{"id":7,"t":1}`, 0, 1), Keep},
			{msg("a", `{"id":7,"t":2}`, 0, 2), DropKey},
			{msg("a", `{"id":8,"t":1}`, 0, 3), Keep},
			{msg("b", `{"id":7,"t":1}`, 0, 4), Keep},
		}},
		{"dedup_key: a DUP message is looked up by id", DedupOptions{Key: jsonID}, []step{
			{msg("a", `{"id":7,"t":1}`, 0, 1), Keep},
			{msg("a", `{"id":7,"t":2}`, FlagDup, 2), DropRedelivery},
		}},
		{"dedup_key: messages without an id fall back to DUP", DedupOptions{Key: jsonID}, []step{
			{msg("a", `{"t":1}`, 0, 1), Keep},
			{msg("a", `{"t":1}`, 0, 2), Keep},
			{msg("a", `{"t":1}`, FlagDup, 3), DropRedelivery},
		}},
		{"dedup_key: the window by time forgets old ids", DedupOptions{Key: jsonID, WindowMs: 1000}, []step{
			{msg("a", `{"id":1}`, 0, 1000), Keep},
			{msg("a", `{"id":2}`, 0, 1500), Keep},
			{msg("a", `{"id":1}`, 0, 2000), DropKey},
			{msg("a", `{"id":1}`, 0, 2001), Keep}, // 1000 < 2001-1000
			{msg("a", `{"id":2}`, 0, 2400), DropKey},
		}},
		{"dedup_key: the window by count forgets the oldest", DedupOptions{Key: jsonID, Window: 2}, []step{
			{msg("a", `{"id":1}`, 0, 1), Keep},
			{msg("a", `{"id":2}`, 0, 2), Keep},
			{msg("a", `{"id":3}`, 0, 3), Keep},
			{msg("a", `{"id":1}`, 0, 4), Keep},
			{msg("a", `{"id":3}`, 0, 5), DropKey},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustOpen(t, t.TempDir(), Options{})
			defer l.Close()
			d := NewDedup(tt.opts)
			defer d.Close()
			if err := d.Load(l); err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				if got := observeAppend(t, d, l, []Entry{s.e}, func(int) Origin { return Origin{} })[0]; got != s.want {
					t.Fatalf("step %d (%s %s flags %d): %v, want %v", i, s.e.Topic, s.e.Payload, s.e.Flags, got, s.want)
				}
			}
		})
	}
}

// TestDedup_DuplicateInOneBatch: the original and its redelivery can share
// a batch (the original queued from the lost connection, the redelivery
// from the new one).
func TestDedup_DuplicateInOneBatch(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{})
	defer l.Close()
	d := NewDedup(DedupOptions{MaxInflight: 10})
	defer d.Close()
	if err := d.Load(l); err != nil {
		t.Fatal(err)
	}
	entries := []Entry{reading(1, false), reading(2, false), reading(1, true), reading(2, false)}
	origins := []Origin{conn(0, 1, false), conn(0, 1, false), conn(0, 2, true), conn(0, 2, true)}
	got := observeAppend(t, d, l, entries, func(i int) Origin { return origins[i] })
	want := []Verdict{Keep, Keep, DropRedelivery, DropResend}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("verdicts %v, want %v", got, want)
		}
	}
	if l.LastOffset() != 2 {
		t.Fatalf("log holds %d entries, want 2", l.LastOffset())
	}
}

// TestDedup_Truncate: truncating the log drops the index blocks below its
// first offset, and their entries' redeliveries are then unmatched.
func TestDedup_Truncate(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{SegmentBytes: 256 << 10, MaxDiskBytes: 1 << 30})
	defer l.Close()
	d := NewDedup(DedupOptions{})
	defer d.Close()
	if err := d.Load(l); err != nil {
		t.Fatal(err)
	}
	const n = 300_000
	for at := 0; at < n; at += 1000 {
		entries := make([]Entry, 1000)
		for i := range entries {
			entries[i] = reading(at+i, false)
		}
		observeAppend(t, d, l, entries, func(int) Origin { return Origin{} })
	}
	before := d.Stats()
	if before.Indexed != n || before.IndexFirst != 1 {
		t.Fatalf("stats before truncation %+v, want %d entries from 1", before, n)
	}
	if err := l.Truncate(200_000); err != nil {
		t.Fatal(err)
	}
	first := l.FirstOffset()
	e := reading(n-1, true)
	if v := observeAppend(t, d, l, []Entry{e}, func(int) Origin { return Origin{} })[0]; v != DropRedelivery {
		t.Fatalf("redelivery of the newest: %v", v)
	}
	after := d.Stats()
	if after.Indexed >= before.Indexed || after.IndexFirst > first || first-after.IndexFirst >= indexBlockLen || after.IndexBytes >= before.IndexBytes {
		t.Fatalf("after truncating the log to %d: stats %+v (before %+v)", first, after, before)
	}
	e = reading(0, true) // offset 1: truncated
	if v := observeAppend(t, d, l, []Entry{e}, func(int) Origin { return Origin{} })[0]; v != KeepUnmatched {
		t.Fatalf("redelivery of a truncated entry: %v, want %v", v, KeepUnmatched)
	}
}

// TestDedup_Bound: the index holds at most IndexMax entries, dropping the
// oldest block of 65,536 beyond it.
func TestDedup_Bound(t *testing.T) {
	tests := []struct {
		indexMax, entries, wantIndexed int
	}{
		{1 << 16, 100_000, 100_000 - 1<<16},
		{1 << 17, 100_000, 100_000},
		{1 << 17, 200_000, 200_000 - 2<<16},
		{100_000, 200_000, 200_000 - 2<<16},
		{1, 100_000, 100_000 - 1<<16}, // at least one block
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.indexMax, "/", tt.entries), func(t *testing.T) {
			d := NewDedup(DedupOptions{IndexMax: tt.indexMax})
			defer d.Close()
			for i := range tt.entries {
				d.index.add(uint64(i)*0x9e3779b97f4a7c15, uint64(i+1))
			}
			st := d.Stats()
			if st.Indexed != tt.wantIndexed || st.IndexFirst != uint64(tt.entries-tt.wantIndexed+1) {
				t.Fatalf("stats %+v, want %d entries from %d", st, tt.wantIndexed, tt.entries-tt.wantIndexed+1)
			}
			if bound := (tt.indexMax + indexBlockLen - 1) / indexBlockLen * indexBlockLen; st.Indexed > bound || st.Indexed <= bound-indexBlockLen {
				t.Fatalf("%d entries indexed, not within a block below the bound %d", st.Indexed, tt.indexMax)
			}
			if bound := (tt.indexMax + indexBlockLen - 1) / indexBlockLen * indexBlockLen; st.IndexBytes > int64(bound)*8 {
				t.Fatalf("%d bytes reserved for a bound of %d entries", st.IndexBytes, bound)
			}
		})
	}
}

// TestHashIndex_Search checks lookups against the hashes added, with
// lookups between additions (the merge path) and without (a full sort).
func TestHashIndex_Search(t *testing.T) {
	x := hashIndex{max: 1 << 20}
	defer x.reset()
	var added []uint64
	h := uint64(1)
	for i := range 200_000 {
		h ^= h << 13
		h ^= h >> 7
		h ^= h << 17
		x.add(h, uint64(i+1))
		added = append(added, h)
		if i%997 == 0 && !x.contains(h) {
			t.Fatalf("hash %d not found right after adding it", i)
		}
	}
	for i, h := range added {
		if !x.contains(h) {
			t.Fatalf("hash %d of %d not found", i, len(added))
		}
		if x.contains(h + 1) {
			t.Fatalf("hash %d + 1 found", i)
		}
	}
	if x.contains(0) || x.contains(^uint64(0)) {
		t.Fatal("an extreme value not added was found")
	}
}

func TestDedup_Observe_NoAlloc(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{})
	defer l.Close()
	d := NewDedup(DedupOptions{MaxInflight: 1000, Key: jsonID, Window: 1024})
	defer d.Close()
	if err := d.Load(l); err != nil {
		t.Fatal(err)
	}
	entries := make([]Entry, 4096)
	for i := range entries {
		entries[i] = testEntry(uint64(i + 1))
		entries[i].Flags = 0
	}
	off := uint64(1)
	step := func(i int) {
		d.Observe(&entries[i%len(entries)], Origin{Conn: 1})
		d.Appended(off, off)
		off++
	}
	for i := range 2*indexBlockLen + 10 { // past a block boundary
		step(i)
	}
	i := 0
	allocs := testing.AllocsPerRun(4000, func() {
		step(i)
		i++
	})
	if allocs > 0.01 {
		t.Fatalf("Observe allocates %.3f times per message", allocs)
	}
	dup := entries[0]
	dup.Flags = FlagDup
	d.Observe(&dup, Origin{Conn: 1}) // sorts the blocks
	allocs = testing.AllocsPerRun(1000, func() {
		if v := d.Observe(&dup, Origin{Conn: 1}); v != DropRedelivery {
			t.Fatalf("redelivery: %v", v)
		}
	})
	if allocs > 0.01 {
		t.Fatalf("a DUP lookup allocates %.3f times", allocs)
	}
}
