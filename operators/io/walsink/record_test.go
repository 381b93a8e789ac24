package walsink

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/io/walsink/qos2"
	"github.com/eddy-edge/eddy/operators/io/walsink/wal"
)

// TestSteps_RoundTrip: a kindSteps record gives back the steps it was
// written with, in order, packet ids included, and a window's worth of
// steps in seq order takes one run of a few bytes.
func TestSteps_RoundTrip(t *testing.T) {
	pub := func(seq uint64, id uint16) qos2.Record {
		return qos2.Record{Seq: seq, ID: id, Step: qos2.StepPublishSent}
	}
	rec := func(seq uint64, id uint16) qos2.Record {
		return qos2.Record{Seq: seq, ID: id, Step: qos2.StepPubrecReceived}
	}
	comp := func(seq uint64, id uint16) qos2.Record {
		return qos2.Record{Seq: seq, ID: id, Step: qos2.StepPubcompReceived}
	}
	window := func(step func(uint64, uint16) qos2.Record, seq uint64, id uint16, n int) []qos2.Record {
		var out []qos2.Record
		for i := range n {
			out = append(out, step(seq+uint64(i), runID(id, i)))
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		open     []qos2.Record // flows open before the record
		recs     []qos2.Record
		maxBytes int // payload bound, kind byte included
	}{
		{"publish window", nil, window(pub, 1000, 1, 20), 1 + 1 + 2 + 1 + 2},
		{"pubrec window", window(pub, 1000, 1, 20), window(rec, 1000, 1, 20), 1 + 1 + 2 + 1},
		{"pubcomp window", window(rec, 1000, 1, 20), window(comp, 1000, 1, 20), 1 + 1 + 2 + 1},
		{"ids wrap past 65535", nil, window(pub, 70000, 65530, 10), 1 + 1 + 3 + 1 + 2},
		{"a gap in seqs starts a run", nil, []qos2.Record{pub(5, 1), pub(6, 2), pub(9, 3)}, 1 + 2*(1+1+1+2)},
		{"an id out of turn starts a run", nil, []qos2.Record{pub(5, 1), pub(6, 7)}, 1 + 2*(1+1+1+2)},
		{"steps interleaved keep their order", window(pub, 1, 1, 3),
			[]qos2.Record{rec(1, 1), comp(1, 1), pub(4, 1), rec(2, 2), rec(3, 3)}, 1 + 4*(1+1+1) + 2},
		{"large seqs", nil, window(pub, 1<<40, 100, 3), 1 + 1 + 6 + 1 + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newLogState()
			for _, r := range tc.open {
				st.applyStep(r)
			}
			frame := appendSteps(nil, tc.recs)
			p := frame[wal.FrameHeaderBytes:]
			if len(p) > tc.maxBytes {
				t.Errorf("%d steps took %d bytes, want ≤ %d", len(tc.recs), len(p), tc.maxBytes)
			}
			var got []qos2.Record
			err := forEachStep(p, st.flowID, func(r qos2.Record) {
				got = append(got, r)
				st.applyStep(r)
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.recs) {
				t.Errorf("read back %v, want %v", got, tc.recs)
			}
		})
	}
}

// TestSteps_Malformed: a kindSteps record that does not parse, or names a
// step for a flow that is not open, is errBadRecord.
func TestSteps_Malformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    []byte
	}{
		{"unknown step", []byte{kindSteps, 4, 1, 0}},
		{"step zero", []byte{kindSteps, 0, 1, 0}},
		{"seq cut off", []byte{kindSteps, 1, 0x80}},
		{"run length missing", []byte{kindSteps, 1, 5}},
		{"packet id cut off", []byte{kindSteps, 1, 5, 0, 1}},
		{"packet id 0", []byte{kindSteps, 1, 5, 0, 0, 0}},
		{"pubrec of no open flow", []byte{kindSteps, 2, 5, 0}},
		{"pubcomp of no open flow", []byte{kindSteps, 3, 5, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newLogState()
			if err := st.apply(1, tc.p); !errors.Is(err, errBadRecord) {
				t.Errorf("apply = %v, want errBadRecord", err)
			}
		})
	}
}

// TestData_RoundTrip: a message record gives back its epoch, seq, retain
// flag, topic and payload, and costs at most dataOverhead beyond them.
func TestData_RoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name         string
		epoch, seq   uint64
		retain       bool
		topic, payld string
	}{
		{"small", 3, 17, false, "eddy/out", `{"n":1}`},
		{"retained, empty payload", 1, 1, true, "t", ""},
		{"large integers", 1 << 60, 1<<64 - 1, false, "a/b", "x"},
		{"long topic", 9, 1000, false, strings.Repeat("t", 65535), "p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame := appendData(nil, tc.epoch, tc.seq, tc.retain, tc.topic, []byte(tc.payld))
			if extra := len(frame) - len(tc.topic) - len(tc.payld); extra > dataOverhead {
				t.Errorf("frame of %d bytes beyond topic and payload, dataOverhead %d", extra, dataOverhead)
			}
			d, err := decodeData(frame[wal.FrameHeaderBytes:])
			if err != nil {
				t.Fatal(err)
			}
			if d.epoch != tc.epoch || d.seq != tc.seq || d.retain != tc.retain || string(d.topic) != tc.topic || string(d.payload) != tc.payld {
				t.Errorf("read back %d %d %v %q %q", d.epoch, d.seq, d.retain, d.topic, d.payload)
			}
		})
	}
}

// TestData_Malformed: a message record that does not parse is errBadRecord.
func TestData_Malformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    []byte
	}{
		{"epoch cut off", []byte{kindDataCompact, 0x80}},
		{"seq missing", []byte{kindDataCompact, 1}},
		{"flags missing", []byte{kindDataCompact, 1, 2}},
		{"topic length missing", []byte{kindDataCompact, 1, 2, 0}},
		{"topic overruns", []byte{kindDataCompact, 1, 2, 0, 5, 'a', 'b'}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeData(tc.p); !errors.Is(err, errBadRecord) {
				t.Errorf("decodeData = %v, want errBadRecord", err)
			}
		})
	}
}
