package e2e

import "testing"

// aedes sends a reading again on a later connection, with the id of the
// agent's ack for it, though it had read that ack: allowed once more only
// when the trace proves aedes read it.
func TestAedesFaults_ResentAfterReadAck(t *testing.T) {
	pub := func(conn int, id uint16, seq int) proxyEvent {
		return proxyEvent{conn: conn, kind: pktPublish, toAgent: true, publish: true, id: id, seq: seq}
	}
	ack := func(conn int, id uint16) proxyEvent {
		return proxyEvent{conn: conn, kind: pktPuback, id: id, seq: -1}
	}
	end := func(conn int, broker, eof bool) proxyEvent {
		return proxyEvent{conn: conn, kind: pktEnd, toAgent: broker, eof: eof, seq: -1}
	}
	for _, tc := range []struct {
		name string
		ends []proxyEvent // how connection 1 ended
		// a later PUBACK on connection 1 whose reading is never sent
		// again: proof that aedes read connection 1's acks up to it
		proof bool
		want  int // copies of reading 0 allowed
	}{
		{"agent killed, aedes read to the end", []proxyEvent{end(1, false, false), end(1, true, true)}, false, 2},
		{"aedes closed first", []proxyEvent{end(1, true, true), end(1, false, false)}, false, 1},
		{"agent killed, aedes' side reset", []proxyEvent{end(1, false, false), end(1, true, false)}, false, 1},
		{"aedes closed first, a later ack proven read", []proxyEvent{end(1, true, true), end(1, false, false)}, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := []proxyEvent{pub(1, 7, 0), pub(1, 8, 1), ack(1, 7)}
			if tc.proof {
				ev = append(ev, ack(1, 8))
			}
			ev = append(ev, tc.ends...)
			ev = append(ev, pub(2, 7, 0), ack(2, 7))
			if !tc.proof {
				ev = append(ev, ack(2, 8)) // reading 1 acked on the last connection
			}
			f := aedesFaults(ev, 2)
			if got := f.copies(0); got != tc.want {
				t.Errorf("reading 0 allowed %d copies, want %d (unseen %d)", got, tc.want, f.unseen)
			}
			if got := f.copies(1); got != 1 {
				t.Errorf("reading 1 allowed %d copies, want 1", got)
			}
		})
	}
}
