package sparkplug

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// msg is an action with its payload decoded, for assertions.
type msg struct {
	kind  ActionKind
	topic string
	qos   byte
	p     Payload
}

func decodeActions(t *testing.T, acts []Action) []msg {
	t.Helper()
	var out []msg
	for _, a := range acts {
		m := msg{kind: a.Kind, topic: a.Topic, qos: a.QoS}
		if a.Retain {
			t.Errorf("%s is retained; Sparkplug messages of an edge node never are", a.Topic)
		}
		if a.Kind == Publish {
			// Copy: the payload is valid only until the next call.
			if err := DecodePayload(append([]byte(nil), a.Payload...), &m.p); err != nil {
				t.Fatalf("%s: %v", a.Topic, err)
			}
		}
		out = append(out, m)
	}
	return out
}

func topics(ms []msg) string {
	var s []string
	for _, m := range ms {
		if m.kind == Disconnect {
			s = append(s, "DISCONNECT")
			continue
		}
		s = append(s, fmt.Sprintf("%s seq=%s", m.topic, seqOf(m.p)))
	}
	return strings.Join(s, "\n")
}

func seqOf(p Payload) string {
	if !p.HasSeq {
		return "-"
	}
	return fmt.Sprint(p.Seq)
}

func metric(t *testing.T, p Payload, name string) Metric {
	t.Helper()
	for _, m := range p.Metrics {
		if string(m.Name) == name {
			return m
		}
	}
	t.Fatalf("no metric %q in %+v", name, p)
	return Metric{}
}

func newNode(t *testing.T, host string) *Node {
	t.Helper()
	n, err := NewNode(Config{Group: "plant1", Node: "gw-7", PrimaryHost: host})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var (
	names  = []string{"avg_temp", "max_temp", "min_temp", "n"}
	values = []float64{21.43, 22.1, 20.9, 12}
)

// TestNode_WillAndBirthShareBdSeq: the will is the NDEATH (QoS 1, no seq)
// with the connection's bdSeq; the NBIRTH that follows carries the same
// bdSeq, seq 0 and Node Control/Rebirth = false.
func TestNode_WillAndBirthShareBdSeq(t *testing.T) {
	n := newNode(t, "")
	will := decodeActions(t, []Action{n.Connect(42, 1000)})[0]
	if will.topic != "spBv1.0/plant1/NDEATH/gw-7" || will.qos != 1 || will.p.HasSeq || !will.p.HasTimestamp {
		t.Fatalf("will %+v", will)
	}
	if m := metric(t, will.p, "bdSeq"); m.Datatype != TypeUInt64 || !m.Value.Equal(Long(42)) {
		t.Fatalf("will bdSeq %+v", m)
	}
	if n.Born() {
		t.Fatal("born before CONNACK")
	}
	births := decodeActions(t, n.Connected(1001))
	if len(births) != 1 || births[0].topic != "spBv1.0/plant1/NBIRTH/gw-7" || births[0].qos != 0 {
		t.Fatalf("births:\n%s", topics(births))
	}
	b := births[0].p
	if !b.HasSeq || b.Seq != 0 || b.Timestamp != 1001 {
		t.Fatalf("NBIRTH seq/timestamp: %+v", b)
	}
	if m := metric(t, b, "bdSeq"); m.Datatype != TypeUInt64 || !m.Value.Equal(Long(42)) {
		t.Fatalf("NBIRTH bdSeq %+v", m)
	}
	if m := metric(t, b, RebirthMetric); m.Datatype != TypeBoolean || !m.Value.Equal(Bool(false)) {
		t.Fatalf("NBIRTH rebirth metric %+v", m)
	}
	if got := n.Subscriptions(); len(got) != 1 || got[0] != "spBv1.0/plant1/NCMD/gw-7" {
		t.Fatalf("subscriptions %v", got)
	}
}

// TestNode_NoResultBeforeBirth: results are refused (the caller keeps
// them) until the births are out.
func TestNode_NoResultBeforeBirth(t *testing.T) {
	n := newNode(t, "")
	if acts, ok := n.Result([]byte("k"), names, values, 5, false, 6); ok || acts != nil {
		t.Fatal("result accepted before Connect")
	}
	n.Connect(0, 1)
	if _, ok := n.Result([]byte("k"), names, values, 5, false, 6); ok {
		t.Fatal("result accepted before CONNACK")
	}
	n.Connected(2)
	if _, ok := n.Result([]byte("k"), names, values, 5, false, 6); !ok {
		t.Fatal("result refused after the births")
	}
	n.Disconnected()
	if _, ok := n.Result([]byte("k"), names, values, 5, false, 6); ok {
		t.Fatal("result accepted after the connection was lost")
	}
}

// TestNode_DBirthBeforeFirstDData: a key's first result is its DBIRTH
// (names, aliases, Double datatypes, the values) and a DDATA by alias;
// later results are DDATA only.
func TestNode_DBirthBeforeFirstDData(t *testing.T) {
	n := newNode(t, "")
	n.Connect(0, 1)
	n.Connected(2)
	got := decodeActions(t, must(n.Result([]byte("site/a"), names, values, 60000, false, 61000)))
	if want := "spBv1.0/plant1/DBIRTH/gw-7/site%2Fa seq=1\nspBv1.0/plant1/DDATA/gw-7/site%2Fa seq=2"; topics(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", topics(got), want)
	}
	birth, data := got[0].p, got[1].p
	aliases := map[uint64]string{}
	for i, m := range birth.Metrics {
		if string(m.Name) != names[i] || m.Datatype != TypeDouble || !m.HasAlias || !m.Value.Equal(Double(values[i])) || m.Timestamp != 60000 {
			t.Fatalf("DBIRTH metric %d: %+v", i, m)
		}
		aliases[m.Alias] = names[i]
	}
	if len(aliases) != len(names) {
		t.Fatalf("aliases not distinct: %v", aliases)
	}
	if data.Timestamp != 61000 || len(data.Metrics) != len(names) {
		t.Fatalf("DDATA %+v", data)
	}
	for i, m := range data.Metrics {
		if m.Name != nil || aliases[m.Alias] != names[i] || !m.Value.Equal(Double(values[i])) || m.Timestamp != 60000 || m.IsHistorical {
			t.Fatalf("DDATA metric %d: %+v", i, m)
		}
	}
	got = decodeActions(t, must(n.Result([]byte("site/a"), names, []float64{1, 2, 3, 4}, 120000, true, 121000)))
	if want := "spBv1.0/plant1/DDATA/gw-7/site%2Fa seq=3"; topics(got) != want {
		t.Fatalf("got\n%s", topics(got))
	}
	if m := got[0].p.Metrics[0]; !m.IsHistorical || !m.Value.Equal(Double(1)) {
		t.Fatalf("historical DDATA metric %+v", m)
	}
	// Another key: its own DBIRTH, aliases distinct from the first key's.
	got = decodeActions(t, must(n.Result([]byte("b"), names, values, 60000, false, 122000)))
	for _, m := range got[0].p.Metrics {
		if _, dup := aliases[m.Alias]; dup {
			t.Fatalf("alias %d reused across devices", m.Alias)
		}
	}
}

// TestNode_DatatypesFromFieldTypes: a metric Config.Types names Int64 (a
// count) is Int64 in the DBIRTH and every DDATA, its value a long; the
// others are Double; a missing value (NaN) is is_null either way.
func TestNode_DatatypesFromFieldTypes(t *testing.T) {
	n, err := NewNode(Config{Group: "plant1", Node: "gw-7", Types: map[string]DataType{"n": DataTypeOf(FieldInteger)}})
	if err != nil {
		t.Fatal(err)
	}
	n.Connect(0, 1)
	n.Connected(2)
	got := decodeActions(t, must(n.Result([]byte("k"), names, values, 60000, false, 61000)))
	for _, msg := range got {
		for i, m := range msg.p.Metrics {
			want := Metric{Datatype: TypeDouble, Value: Double(values[i])}
			if names[i] == "n" {
				want = Metric{Datatype: TypeInt64, Value: Long(12)}
			}
			if m.Datatype != want.Datatype || !m.Value.Equal(want.Value) {
				t.Fatalf("%s metric %d: %+v, want %v %+v", msg.topic, i, m, want.Datatype, want.Value)
			}
		}
	}
	got = decodeActions(t, must(n.Result([]byte("k"), names, []float64{math.NaN(), 1, 2, math.NaN()}, 120000, false, 121000)))
	for _, i := range []int{0, 3} {
		if m := got[0].p.Metrics[i]; !m.IsNull || m.Value.Kind != KindNone {
			t.Fatalf("NaN as metric %d (%v): %+v, want is_null", i, m.Datatype, m)
		}
	}
}

// TestNode_SeqWrapsAcrossAllMessages: seq counts every message of the
// session, births included, and 255 is followed by 0.
func TestNode_SeqWrapsAcrossAllMessages(t *testing.T) {
	n := newNode(t, "")
	n.Connect(0, 1)
	next := uint64(0)
	check := func(acts []Action) {
		for _, m := range decodeActions(t, acts) {
			if !m.p.HasSeq || m.p.Seq != next {
				t.Fatalf("%s: seq %s, want %d", m.topic, seqOf(m.p), next)
			}
			next = (next + 1) % 256
		}
	}
	check(n.Connected(2))
	for i := range 600 {
		check(must(n.Result(fmt.Appendf(nil, "k%d", i%7), names, values, int64(i), false, int64(i))))
	}
}

// TestNode_RebirthOnNCMD: Node Control/Rebirth = true republishes NBIRTH
// (same bdSeq, seq 0) and every device's DBIRTH with its last values, in
// the order the devices first appeared; other commands change nothing.
func TestNode_RebirthOnNCMD(t *testing.T) {
	n := newNode(t, "")
	n.Connect(9, 1)
	n.Connected(2)
	must(n.Result([]byte("b"), names, values, 10, false, 11))
	must(n.Result([]byte("a"), names, []float64{5, 6, 7, math.NaN()}, 20, false, 21))
	cmd := func(v bool, name string) []Action {
		acts, err := n.Command(AppendPayload(nil, &Payload{Timestamp: 30, HasTimestamp: true,
			Metrics: []Metric{{Name: []byte(name), Datatype: TypeBoolean, Value: Bool(v)}}}), 31)
		if err != nil {
			t.Fatal(err)
		}
		return acts
	}
	if acts := cmd(false, RebirthMetric); len(acts) != 0 {
		t.Fatalf("rebirth=false answered: %v", acts)
	}
	if acts := cmd(true, "Node Control/Reboot"); len(acts) != 0 {
		t.Fatalf("another command answered: %v", acts)
	}
	got := decodeActions(t, cmd(true, RebirthMetric))
	want := "spBv1.0/plant1/NBIRTH/gw-7 seq=0\nspBv1.0/plant1/DBIRTH/gw-7/b seq=1\nspBv1.0/plant1/DBIRTH/gw-7/a seq=2"
	if topics(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", topics(got), want)
	}
	if m := metric(t, got[0].p, "bdSeq"); !m.Value.Equal(Long(9)) {
		t.Fatalf("rebirth bdSeq %+v", m)
	}
	if m := metric(t, got[2].p, "min_temp"); !m.Value.Equal(Double(7)) || m.Timestamp != 20 {
		t.Fatalf("DBIRTH of a: last value lost: %+v", m)
	}
	if m := metric(t, got[2].p, "n"); !m.IsNull || m.Value.Kind != KindNone || m.Datatype != TypeDouble {
		t.Fatalf("NaN is not is_null: %+v", m)
	}
	if _, err := n.Command([]byte{0x12, 0x05}, 40); err == nil {
		t.Fatal("a malformed NCMD was accepted")
	}
}

// TestNode_SchemaChange: a key whose aggregates change is reborn (DDEATH,
// then DBIRTH with new aliases) before its DDATA.
func TestNode_SchemaChange(t *testing.T) {
	n := newNode(t, "")
	n.Connect(0, 1)
	n.Connected(2)
	first := decodeActions(t, must(n.Result([]byte("k"), names, values, 10, false, 11)))
	got := decodeActions(t, must(n.Result([]byte("k"), []string{"avg_temp", "p99"}, []float64{1, 2}, 20, false, 21)))
	want := "spBv1.0/plant1/DDEATH/gw-7/k seq=3\nspBv1.0/plant1/DBIRTH/gw-7/k seq=4\nspBv1.0/plant1/DDATA/gw-7/k seq=5"
	if topics(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", topics(got), want)
	}
	old := map[uint64]bool{}
	for _, m := range first[0].p.Metrics {
		old[m.Alias] = true
	}
	for _, m := range got[1].p.Metrics {
		if old[m.Alias] {
			t.Fatalf("alias %d of the old birth reused", m.Alias)
		}
	}
}

// TestNode_PrimaryHost: births wait for the host's STATE online; a stale
// STATE is ignored; the host going offline ends the session (NDEATH,
// disconnect), and the next connection has the next bdSeq.
func TestNode_PrimaryHost(t *testing.T) {
	n := newNode(t, "scada-1")
	if got := n.Subscriptions(); len(got) != 2 || got[1] != "spBv1.0/STATE/scada-1" {
		t.Fatalf("subscriptions %v", got)
	}
	state := func(online bool, ts int64) []msg {
		acts, err := n.HostState(fmt.Appendf(nil, `{"online":%t,"timestamp":%d}`, online, ts), 100)
		if err != nil {
			t.Fatal(err)
		}
		return decodeActions(t, acts)
	}
	n.Connect(3, 1)
	if acts := n.Connected(2); len(acts) != 0 {
		t.Fatalf("births before the host is online: %v", acts)
	}
	if got := state(false, 50); len(got) != 0 {
		t.Fatalf("host offline before births: %s", topics(got))
	}
	if got := state(true, 60); topics(got) != "spBv1.0/plant1/NBIRTH/gw-7 seq=0" {
		t.Fatalf("host online: %s", topics(got))
	}
	if got := state(true, 61); len(got) != 0 {
		t.Fatalf("second online STATE reborn: %s", topics(got))
	}
	must(n.Result([]byte("k"), names, values, 10, false, 11))
	if got := state(false, 59); len(got) != 0 || !n.Born() {
		t.Fatalf("a STATE older than the last one was obeyed: %s", topics(got))
	}
	got := state(false, 70)
	if topics(got) != "spBv1.0/plant1/NDEATH/gw-7 seq=-\nDISCONNECT" || got[0].qos != 1 {
		t.Fatalf("host offline: %s", topics(got))
	}
	if m := metric(t, got[0].p, "bdSeq"); !m.Value.Equal(Long(3)) {
		t.Fatalf("NDEATH bdSeq %+v", m)
	}
	if _, ok := n.Result([]byte("k"), names, values, 10, false, 11); ok {
		t.Fatal("result accepted after the session ended")
	}
	will := decodeActions(t, []Action{n.Connect(4, 200)})[0]
	if m := metric(t, will.p, "bdSeq"); !m.Value.Equal(Long(4)) {
		t.Fatalf("next will bdSeq %+v", m)
	}
	n.Connected(201)
	got = state(true, 80)
	if topics(got) != "spBv1.0/plant1/NBIRTH/gw-7 seq=0\nspBv1.0/plant1/DBIRTH/gw-7/k seq=1" {
		t.Fatalf("reconnect births: %s", topics(got))
	}
	if _, err := n.HostState([]byte("ONLINE"), 1); err == nil {
		t.Fatal("a Sparkplug 2 STATE payload was accepted")
	}
	// A rebirth request while the host is offline waits for it.
	state(false, 90)
	n.Connect(5, 300)
	n.Connected(301)
	acts, err := n.Command(AppendPayload(nil, &Payload{Metrics: []Metric{{Name: []byte(RebirthMetric), Value: Bool(true)}}}), 302)
	if err != nil || len(acts) != 0 {
		t.Fatalf("rebirth before the host is online: %v %v", acts, err)
	}
}

func TestNode_BadIDs(t *testing.T) {
	for _, cfg := range []Config{{Group: "", Node: "n"}, {Group: "g", Node: "a/b"}, {Group: "g", Node: "n", PrimaryHost: "h#"}} {
		if _, err := NewNode(cfg); err == nil {
			t.Errorf("NewNode(%+v) accepted", cfg)
		}
	}
}

func must(acts []Action, ok bool) []Action {
	if !ok {
		panic("result refused")
	}
	return acts
}

// TestNode_MaxDevices: the device table holds at most MaxDevices keys:
// Admit refuses a new key beyond it and Result publishes nothing for one,
// while known keys go on, and the next births repeat only the admitted devices.
func TestNode_MaxDevices(t *testing.T) {
	n, err := NewNode(Config{Group: "g", Node: "n", MaxDevices: 2})
	if err != nil {
		t.Fatal(err)
	}
	n.Connect(0, 1)
	n.Connected(1)
	names := []string{"avg"}
	for i, tc := range []struct {
		key   string
		admit bool
	}{{"a", true}, {"b", true}, {"c", false}, {"a", true}, {"d", false}, {"b", true}} {
		if got := n.Admit([]byte(tc.key)); got != tc.admit {
			t.Fatalf("result %d: Admit(%q) = %v, want %v", i, tc.key, got, tc.admit)
		}
		acts, ok := n.Result([]byte(tc.key), names, []float64{1}, 10, false, 2)
		if !ok || (len(acts) > 0) != tc.admit {
			t.Fatalf("result %d of %q: %d actions, ok %v; want actions only when admitted", i, tc.key, len(acts), ok)
		}
	}
	n.Connect(1, 3)
	if got := topics(decodeActions(t, n.Connected(3))); strings.Count(got, "DBIRTH") != 2 {
		t.Errorf("births of the next session:\n%s\nwant the DBIRTHs of the two admitted devices", got)
	}
}

// TestNode_HostStateBeforeConnected: the primary host's retained STATE
// can arrive between the subscription and Connected; the births then go
// out at Connected rather than wait for the next STATE.
func TestNode_HostStateBeforeConnected(t *testing.T) {
	n, err := NewNode(Config{Group: "g", Node: "n", PrimaryHost: "h"})
	if err != nil {
		t.Fatal(err)
	}
	n.Connect(0, 1)
	if acts, err := n.HostState([]byte(`{"online":true,"timestamp":5}`), 2); err != nil || len(acts) != 0 {
		t.Fatalf("STATE before Connected: %d actions, %v; want none yet", len(acts), err)
	}
	if got := topics(decodeActions(t, n.Connected(3))); !strings.Contains(got, "NBIRTH") || !n.Born() {
		t.Errorf("Connected after an online STATE:\n%s\nwant the NBIRTH", got)
	}
}
