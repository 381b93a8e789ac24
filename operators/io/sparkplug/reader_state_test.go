package sparkplug

import (
	"bytes"
	"strings"
	"testing"
)

// TestReader_SnapshotRestore: a Reader restored from a snapshot taken
// mid-session resolves the aliases of the data that follows and checks its
// seq, as the one that read the births does; the snapshot is
// deterministic.
func TestReader_SnapshotRestore(t *testing.T) {
	n := newNode(t, "")
	before := NewReader()
	feed := func(r *Reader, acts []Action) []string {
		var got []string
		for _, a := range acts {
			reason, detail := r.Message(a.Topic, a.Payload, func(rd *Reading) { got = append(got, formatReading(rd)) })
			if reason != "" {
				got = append(got, reason+": "+detail)
			}
		}
		return got
	}
	n.Connect(2, 1)
	feed(before, n.Connected(2))
	feed(before, must(n.Result([]byte("a"), names, values, 10, false, 11)))
	feed(before, must(n.Result([]byte("b/c"), names[:2], values[:2], 10, false, 11)))
	snap := before.AppendSnapshot(nil)
	if again := before.AppendSnapshot(nil); !bytes.Equal(snap, again) {
		t.Fatal("two snapshots of one state differ")
	}
	after := NewReader()
	if err := after.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if got := after.AppendSnapshot(nil); !bytes.Equal(got, snap) {
		t.Fatal("the restored Reader's snapshot differs")
	}
	next := must(n.Result([]byte("b/c"), names[:2], []float64{1, 2}, 20, false, 21))
	want := feed(before, next)
	if got := feed(after, next); strings.Join(got, " ") != strings.Join(want, " ") || len(got) != 2 {
		t.Fatalf("restored reader read\n %v\nthe original\n %v", got, want)
	}
}

func TestReader_RestoreRejectsCorrupt(t *testing.T) {
	r := NewReader()
	r.Message("spBv1.0/g/NBIRTH/n", AppendPayload(nil, &Payload{Seq: 0, HasSeq: true, Metrics: []Metric{{Name: []byte("x"), Alias: 1, HasAlias: true, Datatype: TypeDouble, Value: Double(1)}}}), func(*Reading) {})
	snap := r.AppendSnapshot(nil)
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "unknown version"},
		{"version", append([]byte{9}, snap[1:]...), "unknown version"},
		{"truncated", snap[:len(snap)-1], "truncated"},
		{"trailing", append(append([]byte(nil), snap...), 0), "trailing data"},
		{"huge count", []byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f}, "exceeds the snapshot"},
	} {
		fresh := NewReader()
		if err := fresh.Restore(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
		if len(fresh.nodes) != 0 {
			t.Errorf("%s: a failed restore changed the reader", c.name)
		}
	}
}
