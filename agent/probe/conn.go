package probe

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/eddy-edge/eddy/operators/io/walsink"
)

// Endpoint is where and as whom a probe connects.
type Endpoint struct {
	Broker             string // tcp://, ssl://, tls://, mqtts:// URL
	ClientID           string
	Username, Password string
	TLS                *tls.Config
}

// ack is one packet from the broker on a raw connection, or its end.
type ack struct {
	kind byte // packets.Puback, Pubrec or Pubcomp
	id   uint16
	err  error // the connection ended
}

// rawConn is a publishing connection of MQTT 3.1.1 packets written and read
// with paho's codec, so the probe sees which acknowledgement answers each
// PUBLISH (PUBACK or PUBREC) and when the broker closes the connection;
// paho's client hides both.
type rawConn struct {
	conn net.Conn
	bw   *bufio.Writer
	acks chan ack
	pub  *packets.PublishPacket
}

// dialRaw connects with a clean session (the probe leaves no session
// behind) and reads the broker's packets in a goroutine until the
// connection ends.
func dialRaw(ctx context.Context, ep Endpoint) (*rawConn, error) {
	u, err := url.Parse(ep.Broker)
	if err != nil {
		return nil, fmt.Errorf("broker url: %w", err)
	}
	switch u.Scheme {
	case "ssl", "tls", "mqtts", "tcp", "mqtt":
	default:
		return nil, fmt.Errorf("broker url %q: the probe speaks tcp:// and ssl:// only", ep.Broker)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := walsink.DialBroker(ctx, ep.Broker, ep.TLS, 10*time.Second)
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	cp.ProtocolName, cp.ProtocolVersion = "MQTT", 4
	cp.CleanSession = true
	cp.ClientIdentifier = ep.ClientID
	cp.Keepalive = 60
	if ep.Username != "" {
		cp.UsernameFlag, cp.Username = true, ep.Username
	}
	if ep.Password != "" {
		cp.PasswordFlag, cp.Password = true, []byte(ep.Password)
	}
	if err := cp.Write(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("send CONNECT: %w", err)
	}
	pkt, err := packets.ReadPacket(conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("read CONNACK: %w", err)
	}
	ca, ok := pkt.(*packets.ConnackPacket)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("expected CONNACK, got %s", pkt)
	}
	if ca.ReturnCode != packets.Accepted {
		conn.Close()
		return nil, fmt.Errorf("broker refused the connection: %s (%d)", packets.ConnackReturnCodes[ca.ReturnCode], ca.ReturnCode)
	}
	_ = conn.SetDeadline(time.Time{})
	r := &rawConn{conn: conn, bw: bufio.NewWriterSize(conn, 64<<10), acks: make(chan ack, 1024),
		pub: packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)}
	go r.read()
	return r, nil
}

func (r *rawConn) read() {
	br := bufio.NewReaderSize(r.conn, 64<<10)
	for {
		pkt, err := packets.ReadPacket(br)
		if err != nil {
			r.acks <- ack{err: err}
			close(r.acks)
			return
		}
		switch p := pkt.(type) {
		case *packets.PubackPacket:
			r.acks <- ack{kind: packets.Puback, id: p.MessageID}
		case *packets.PubrecPacket:
			r.acks <- ack{kind: packets.Pubrec, id: p.MessageID}
		case *packets.PubcompPacket:
			r.acks <- ack{kind: packets.Pubcomp, id: p.MessageID}
		}
	}
}

// publish encodes a PUBLISH into the write buffer; flush sends it.
func (r *rawConn) publish(qos byte, id uint16, dup bool, topic string, payload []byte) error {
	r.pub.Qos, r.pub.Dup, r.pub.Retain = qos, dup, false
	r.pub.TopicName, r.pub.MessageID, r.pub.Payload = topic, id, payload
	return r.pub.Write(r.bw)
}

func (r *rawConn) pubrel(id uint16) error {
	p := packets.NewControlPacket(packets.Pubrel).(*packets.PubrelPacket)
	p.MessageID = id
	return p.Write(r.bw)
}

func (r *rawConn) flush() error { return r.bw.Flush() }

// close sends DISCONNECT (best effort) and closes.
func (r *rawConn) close() {
	_ = packets.NewControlPacket(packets.Disconnect).Write(r.bw)
	_ = r.bw.Flush()
	_ = r.conn.Close()
	for range r.acks { // until the reader has ended
	}
}
