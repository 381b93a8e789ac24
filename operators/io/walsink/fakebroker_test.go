package walsink

import (
	"net"
	"sync"
	"testing"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// fakeBroker is an in-process MQTT 3.1.1 broker for one publishing client,
// for what no real broker at hand does. It keeps the client's session
// across connections (incoming QoS 2 ids until PUBREL), delivers a QoS 2
// message at its PUBREL, answers a repeated PUBLISH of an id it holds
// with PUBREC and no second delivery, and refuses MQTT 5 connections as a
// 3.1.1 broker does (CONNACK "unacceptable protocol version"; it announces
// no limits). Its behaviour at the edges is set by its fields.
type fakeBroker struct {
	ln net.Listener
	// limit > 0: a QoS 2 PUBLISH arriving while limit are held is dropped
	// after a PUBREC, and the connection closed (the way a broker over
	// its in-flight limit may fail a 3.1.1 client).
	limit int
	// puback: answer QoS 2 PUBLISHes with PUBACK and deliver them (a
	// broker that downgrades QoS 2 to 1, as RabbitMQ's MQTT plugin does).
	puback bool
	// noSession: CONNACK says session present = 0 (aedes does so to a
	// client without subscriptions); silent: PUBLISHes are not answered.
	noSession, silent bool
	// closeV5: an MQTT 5 CONNECT is closed unanswered (RabbitMQ's MQTT
	// plugin does), not refused in a CONNACK.
	closeV5 bool

	mu        sync.Mutex
	held      map[uint16][]byte // id → payload, received, not released
	delivered map[string]int    // payload → deliveries
	publishes int               // PUBLISH packets received
	closes    int               // connections it closed over its limit
	conns     int
	open      []net.Conn
}

// dropAll closes every connection (a broker restart, say).
func (fb *fakeBroker) dropAll() {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	for _, c := range fb.open {
		c.Close()
	}
	fb.open = nil
}

func startFakeBroker(t *testing.T, fb *fakeBroker) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fb.ln, fb.held, fb.delivered = ln, map[uint16][]byte{}, map[string]int{}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go fb.serve(c)
		}
	}()
	return fb
}

func (fb *fakeBroker) url() string { return "tcp://" + fb.ln.Addr().String() }

func (fb *fakeBroker) serve(c net.Conn) {
	defer c.Close()
	p, err := packets.ReadPacket(c)
	cp, ok := p.(*packets.ConnectPacket)
	if ok && cp.ProtocolVersion == 5 {
		if fb.closeV5 {
			return
		}
		// A 3.1.1 broker's answer to MQTT 5 (MQTT 3.1.1 §3.1.2.2).
		ack := packets.NewControlPacket(packets.Connack).(*packets.ConnackPacket)
		ack.ReturnCode = packets.ErrRefusedBadProtocolVersion
		_ = ack.Write(c)
		return
	}
	if err != nil || !ok || cp.ProtocolVersion != 4 {
		return
	}
	fb.mu.Lock()
	fb.conns++
	fb.open = append(fb.open, c)
	noSession := fb.noSession
	fb.mu.Unlock()
	ack := packets.NewControlPacket(packets.Connack).(*packets.ConnackPacket)
	ack.SessionPresent = !noSession
	if ack.Write(c) != nil {
		return
	}
	for {
		p, err := packets.ReadPacket(c)
		if err != nil {
			return
		}
		var answer packets.ControlPacket
		closeAfter := false
		fb.mu.Lock()
		switch p := p.(type) {
		case *packets.PublishPacket:
			fb.publishes++
			switch {
			case fb.silent:
			case fb.puback:
				fb.delivered[string(p.Payload)]++
				a := packets.NewControlPacket(packets.Puback).(*packets.PubackPacket)
				a.MessageID = p.MessageID
				answer = a
			default:
				_, holds := fb.held[p.MessageID]
				if !holds && fb.limit > 0 && len(fb.held) >= fb.limit {
					closeAfter = true // dropped: PUBREC, then close
					fb.closes++
				} else if !holds {
					fb.held[p.MessageID] = append([]byte(nil), p.Payload...)
				}
				a := packets.NewControlPacket(packets.Pubrec).(*packets.PubrecPacket)
				a.MessageID = p.MessageID
				answer = a
			}
		case *packets.PubrelPacket:
			if m, ok := fb.held[p.MessageID]; ok {
				fb.delivered[string(m)]++
				delete(fb.held, p.MessageID)
			}
			a := packets.NewControlPacket(packets.Pubcomp).(*packets.PubcompPacket)
			a.MessageID = p.MessageID
			answer = a
		case *packets.PingreqPacket:
			answer = packets.NewControlPacket(packets.Pingresp)
		case *packets.DisconnectPacket:
			fb.mu.Unlock()
			return
		}
		fb.mu.Unlock()
		if answer != nil && answer.Write(c) != nil {
			return
		}
		if closeAfter {
			return
		}
	}
}

// counts returns how many distinct payloads were delivered, how many more
// than once, and the PUBLISH packets received.
func (fb *fakeBroker) counts() (distinct, repeated, publishes int) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	for _, n := range fb.delivered {
		distinct++
		if n > 1 {
			repeated++
		}
	}
	return distinct, repeated, fb.publishes
}
