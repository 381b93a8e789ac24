package sparkplug

import (
	"fmt"
	"strings"
	"testing"
)

// readerStep is one message and what the Reader makes of it: the
// readings as "device/name=value@ts" (with " hist" or " stale"), or the
// refusal's reason.
type readerStep struct {
	topic  string
	p      Payload
	want   string
	reason string
}

func formatReading(r *Reading) string {
	v := "null"
	if !r.IsNull {
		switch r.Value.Kind {
		case KindDouble, KindFloat:
			v = fmt.Sprint(r.Value.Float64())
		case KindBool:
			v = fmt.Sprint(r.Value.Bits == 1)
		case KindString:
			v = string(r.Value.Str)
		default:
			v = fmt.Sprint(r.Value.Bits)
		}
	}
	s := fmt.Sprintf("%s/%s=%s:%s@%d", r.Device, r.Name, v, r.Datatype, r.Timestamp)
	if r.Historical {
		s += " hist"
	}
	if r.Stale {
		s += " stale"
	}
	return s
}

func runReader(t *testing.T, r *Reader, steps []readerStep) {
	t.Helper()
	for i, s := range steps {
		var got []string
		b := AppendPayload(nil, &s.p)
		reason, detail := r.Message(s.topic, b, func(rd *Reading) {
			if rd.Group != "g" || rd.Node != "n" {
				t.Errorf("step %d: reading of %s/%s", i, rd.Group, rd.Node)
			}
			got = append(got, formatReading(rd))
		})
		if reason != s.reason || (reason != "" && detail == "") {
			t.Fatalf("step %d (%s): reason %q (%s), want %q", i, s.topic, reason, detail, s.reason)
		}
		if g := strings.Join(got, " "); g != s.want {
			t.Fatalf("step %d (%s): readings\n %s\nwant\n %s", i, s.topic, g, s.want)
		}
	}
}

func pl(ts, seq uint64, ms ...Metric) Payload {
	return Payload{Timestamp: ts, HasTimestamp: true, Seq: seq, HasSeq: true, Metrics: ms}
}

func named(name string, dt DataType, v Value, alias uint64) Metric {
	return Metric{Name: []byte(name), Datatype: dt, Value: v, Alias: alias, HasAlias: alias != 0}
}

func byAlias(alias uint64, v Value, ts uint64) Metric {
	return Metric{Alias: alias, HasAlias: true, Value: v, Timestamp: ts, HasTimestamp: ts != 0}
}

// TestReader_Session: births register names and aliases; data is resolved
// (a refused message still counts in seq: the node sent it)
// by alias (its datatype from the birth when left out); seq is checked
// over every message; deaths make the last values stale; an older
// session's late will is ignored.
func TestReader_Session(t *testing.T) {
	nbirth := pl(100, 0, named("bdSeq", TypeUInt64, Long(7), 0), named(RebirthMetric, TypeBoolean, Bool(false), 0), named("cpu", TypeDouble, Double(0.5), 1))
	ndeath := func(bd uint64) Payload {
		return Payload{Timestamp: 900, HasTimestamp: true, Metrics: []Metric{named("bdSeq", TypeUInt64, Long(bd), 0)}}
	}
	runReader(t, NewReader(), []readerStep{
		{topic: "spBv1.0/g/NDATA/n", p: pl(1, 1, byAlias(1, Double(1), 0)), reason: ReasonBeforeBirth},
		{topic: "spBv1.0/g/NBIRTH/n", p: nbirth,
			want: "/bdSeq=7:UInt64@100 /Node Control/Rebirth=false:Boolean@100 /cpu=0.5:Double@100"},
		{topic: "spBv1.0/g/DDATA/n/d", p: pl(101, 1, byAlias(2, Double(1), 0)), reason: ReasonBeforeBirth},
		{topic: "spBv1.0/g/DBIRTH/n/d", p: pl(102, 2, named("t", TypeDouble, Double(20), 2), named("on", TypeBoolean, Bool(true), 3)),
			want: "d/t=20:Double@102 d/on=true:Boolean@102"},
		{topic: "spBv1.0/g/DDATA/n/d", p: pl(103, 3, byAlias(2, Double(21.5), 50), Metric{Alias: 3, HasAlias: true, Value: Bool(false), IsHistorical: true}),
			want: "d/t=21.5:Double@50 d/on=false:Boolean@103 hist"},
		{topic: "spBv1.0/g/NDATA/n", p: pl(104, 4, byAlias(1, Double(0.7), 0)), want: "/cpu=0.7:Double@104"},
		{topic: "spBv1.0/g/DDATA/n/d", p: pl(105, 5, byAlias(9, Double(1), 0)), reason: ReasonUnknownAlias},
		{topic: "spBv1.0/g/DDATA/n/d", p: pl(106, 6, byAlias(1, Double(1), 0)), reason: ReasonUnknownAlias}, // a node alias in a device's message
		{topic: "spBv1.0/g/NCMD/n", p: Payload{Metrics: []Metric{named(RebirthMetric, TypeBoolean, Bool(true), 0)}}},
		{topic: "spBv1.0/g/DDEATH/n/d", p: pl(107, 7), want: "d/t=21.5:Double@107 stale d/on=false:Boolean@107 stale"},
		{topic: "spBv1.0/g/DDATA/n/d", p: pl(108, 8, byAlias(2, Double(1), 0)), reason: ReasonBeforeBirth},
		{topic: "spBv1.0/g/NDEATH/n", p: ndeath(6)}, // an older session's will
		{topic: "spBv1.0/g/NDATA/n", p: pl(109, 9, byAlias(1, Double(0.9), 0)), want: "/cpu=0.9:Double@109"},
		{topic: "spBv1.0/g/NDEATH/n", p: ndeath(7), want: "/bdSeq=7:UInt64@900 stale /Node Control/Rebirth=false:Boolean@900 stale /cpu=0.9:Double@900 stale"},
		{topic: "spBv1.0/g/NDATA/n", p: pl(110, 10, byAlias(1, Double(1), 0)), reason: ReasonBeforeBirth},
	})
}

// TestReader_SeqGap: a message whose seq is not the next one is refused,
// and so is the node's data until its rebirth; seq wraps from 255 to 0.
func TestReader_SeqGap(t *testing.T) {
	r := NewReader()
	steps := []readerStep{{topic: "spBv1.0/g/NBIRTH/n", p: pl(1, 250, named("x", TypeInt64, Long(1), 1)), want: "/x=1:Int64@1"}}
	for seq := uint64(251); seq < 256+3; seq++ {
		steps = append(steps, readerStep{topic: "spBv1.0/g/NDATA/n", p: pl(2, seq%256, byAlias(1, Long(seq%256), 0)), want: fmt.Sprintf("/x=%d:Int64@2", seq%256)})
	}
	steps = append(steps,
		readerStep{topic: "spBv1.0/g/NDATA/n", p: pl(3, 4, byAlias(1, Long(4), 0)), reason: ReasonSeqGap},
		readerStep{topic: "spBv1.0/g/NDATA/n", p: pl(3, 3, byAlias(1, Long(3), 0)), reason: ReasonBeforeBirth},
		readerStep{topic: "spBv1.0/g/NBIRTH/n", p: pl(4, 0, named("x", TypeInt64, Long(9), 1)), want: "/x=9:Int64@4"},
		readerStep{topic: "spBv1.0/g/NDATA/n", p: Payload{Metrics: []Metric{byAlias(1, Long(1), 0)}}, reason: ReasonSeqGap},
	)
	runReader(t, r, steps)
}

func TestReader_Refusals(t *testing.T) {
	r := NewReader()
	for _, c := range []struct {
		topic   string
		payload []byte
		reason  string
	}{
		{"sensors/a", []byte{1}, ReasonNotSparkplug},
		{"spBv1.0/g/NDATA", []byte{1}, ReasonNotSparkplug},
		{"spBv1.0/g/NBIRTH/n", []byte{0x12, 0x05}, ReasonBadPayload},
		{"spBv1.0/g/NBIRTH/n", nil, ReasonBadPayload},
		{"spBv1.0/g/NBIRTH/n", []byte{0x12, 0x00}, ReasonBadPayload}, // a nameless metric: found by FuzzReaderMessage
		{"spBv1.0/STATE/h", []byte(`{"online":true}`), ""},
	} {
		reason, detail := r.Message(c.topic, c.payload, func(*Reading) { t.Fatalf("%s: a reading", c.topic) })
		if reason != c.reason || (reason != "" && detail == "") {
			t.Errorf("%s: reason %q (%s), want %q", c.topic, reason, detail, c.reason)
		}
	}
}

// TestReader_ReadsNode: what Node publishes, Reader reads back as the
// results it was given.
func TestReader_ReadsNode(t *testing.T) {
	n := newNode(t, "")
	r := NewReader()
	var got []string
	feed := func(acts []Action) {
		for _, a := range acts {
			if reason, detail := r.Message(a.Topic, a.Payload, func(rd *Reading) {
				if rd.Device != "" {
					got = append(got, formatReading(rd))
				}
			}); reason != "" {
				t.Fatalf("%s: %s %s", a.Topic, reason, detail)
			}
		}
	}
	will := n.Connect(3, 1)
	will.Payload = append([]byte(nil), will.Payload...) // the node's buffer, reused by the next call
	feed(n.Connected(2))
	feed(must(n.Result([]byte("k"), names, values, 60, false, 61)))
	feed(must(n.Result([]byte("k"), names, []float64{1, 2, 3, 4}, 120, true, 121)))
	want := "k/avg_temp=21.43:Double@60 k/max_temp=22.1:Double@60 k/min_temp=20.9:Double@60 k/n=12:Double@60 " +
		"k/avg_temp=21.43:Double@60 k/max_temp=22.1:Double@60 k/min_temp=20.9:Double@60 k/n=12:Double@60 " +
		"k/avg_temp=1:Double@120 hist k/max_temp=2:Double@120 hist k/min_temp=3:Double@120 hist k/n=4:Double@120 hist"
	if g := strings.Join(got, " "); g != want {
		t.Fatalf("got\n %s\nwant\n %s", g, want)
	}
	// The broker publishes the will: the device's last values go stale.
	got = nil
	feed([]Action{will})
	want = "k/avg_temp=1:Double@1 stale k/max_temp=2:Double@1 stale k/min_temp=3:Double@1 stale k/n=4:Double@1 stale"
	if g := strings.Join(got, " "); g != want {
		t.Fatalf("after the will: got\n %s\nwant\n %s", g, want)
	}
}
