package sparkplug

import (
	"testing"
	"time"
)

// The NCMD a Rebirther publishes: Node Control/Rebirth = true, a
// timestamp, no seq (commands carry none).
func TestAppendRebirthCommand(t *testing.T) {
	var p Payload
	if err := DecodePayload(AppendRebirthCommand(nil, 1234), &p); err != nil {
		t.Fatal(err)
	}
	if !p.HasTimestamp || p.Timestamp != 1234 || p.HasSeq || len(p.Metrics) != 1 {
		t.Fatalf("payload %+v", p)
	}
	m := p.Metrics[0]
	if string(m.Name) != RebirthMetric || m.Datatype != TypeBoolean || !m.Value.Equal(Bool(true)) {
		t.Fatalf("metric %+v", m)
	}
}

// Request asks each node at most once per Every, and nothing after
// Close; it never waits for the connection (here a broker that is not
// there).
func TestRebirther_RequestOncePerNode(t *testing.T) {
	r := NewRebirther(RebirthOptions{Broker: "tcp://127.0.0.1:1", ClientID: "test", Every: time.Hour})
	defer r.Close()
	steps := []struct {
		group, node string
		want        bool
	}{
		{"g", "n1", true},
		{"g", "n1", false}, // within Every
		{"g", "n2", true},
		{"h", "n1", true},
	}
	for i, s := range steps {
		if got := r.Request(s.group, s.node); got != s.want {
			t.Fatalf("step %d: Request(%s, %s) = %v, want %v", i, s.group, s.node, got, s.want)
		}
	}
	r.Close()
	if r.Request("g", "n3") {
		t.Fatal("a request after Close was queued")
	}
}
