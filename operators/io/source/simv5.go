package source

// The simulator's MQTT 5 publisher, on mochi's packets codec as the
// source's MQTT 5 connection. Its readings carry the content type
// application/json and the user property "sensor" (the device's name), so
// a pipeline on the simulator can read meta.content_type and
// meta.user_properties.sensor.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	mp "github.com/mochi-mqtt/server/v2/packets"

	"github.com/eddy-edge/eddy/operators/io/mqtt5"
)

// simV5 is one MQTT 5 connection of the simulator.
type simV5 struct {
	c    net.Conn
	mu   sync.Mutex // serializes writes: the publisher's and the reader's PUBRELs
	buf  bytes.Buffer
	pk   mp.Packet
	user [1]mp.UserProperty
	id   uint16
	// done receives one value per QoS 1/2 publish the broker completed
	// (PUBACK, PUBCOMP); lost the reader's end.
	done chan struct{}
	lost chan error
}

// dialSimV5 connects at MQTT 5 with a clean start (the simulator keeps no
// session). mqtt5.ErrVersionRefused tells a broker that speaks 3.1.1 only.
func (s *Simulator) dialSimV5(ctx context.Context) (*simV5, error) {
	c, err := mqtt5.Dial(ctx, s.opts.Broker, nil, connectTimeout)
	if err != nil {
		return nil, err
	}
	connect := mqtt5.Connect{ClientID: s.opts.ClientID, Username: s.opts.Username, Password: s.opts.Password, CleanStart: true}
	_ = c.SetDeadline(time.Now().Add(connectTimeout))
	r := bufio.NewReader(c)
	if _, err := c.Write(connect.Encode()); err != nil {
		c.Close()
		return nil, err
	}
	pk, err := mqtt5.ReadPacket(r, mqtt5.MaxControlPacket)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%w (no CONNACK: %v)", mqtt5.ErrVersionRefused, err)
	}
	ack, err := mqtt5.ParseConnack(pk)
	if err == nil && ack.Code != 0 {
		err = fmt.Errorf("the broker refused the connection: %s (%#02x)", mqtt5.ReasonName(ack.Code), ack.Code)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	p := &simV5{c: c, done: make(chan struct{}, simulatorWindow), lost: make(chan error, 1)}
	go p.read(r)
	return p, nil
}

// read takes the broker's answers: a PUBACK or PUBCOMP completes a
// publish, a PUBREC gets its PUBREL, a DISCONNECT ends the connection.
func (p *simV5) read(r *bufio.Reader) {
	for {
		pk, err := mqtt5.ReadPacket(r, mqtt5.MaxControlPacket)
		if err == nil {
			switch pk.FixedHeader.Type {
			case mp.Puback, mp.Pubcomp:
				p.done <- struct{}{}
			case mp.Pubrec:
				err = p.write(mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Pubrel, Qos: 1}, ProtocolVersion: 5, PacketID: pk.PacketID})
			case mp.Disconnect:
				err = fmt.Errorf("the broker disconnected: %s", mqtt5.ReasonName(pk.ReasonCode))
			}
		}
		if err != nil {
			p.lost <- err
			return
		}
	}
}

func (p *simV5) write(pk mp.Packet) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf.Reset()
	var err error
	if pk.FixedHeader.Type == mp.Publish {
		err = pk.PublishEncode(&p.buf)
	} else {
		err = pk.PubrelEncode(&p.buf)
	}
	if err == nil {
		_, err = p.c.Write(p.buf.Bytes())
	}
	return err
}

// publish sends one reading of device at qos.
func (p *simV5) publish(topic, device string, payload []byte, qos byte) error {
	p.pk = mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Publish, Qos: qos}, ProtocolVersion: 5, TopicName: topic, Payload: payload}
	if qos > 0 {
		if p.id++; p.id == 0 {
			p.id = 1
		}
		p.pk.PacketID = p.id
	}
	p.pk.Properties.ContentType = "application/json"
	p.user[0] = mp.UserProperty{Key: "sensor", Val: device}
	p.pk.Properties.User = p.user[:]
	return p.write(p.pk)
}

func (p *simV5) close() {
	_, _ = p.c.Write([]byte{0xE0, 0})
	_ = p.c.Close()
}

// runV5 is Run at MQTT 5: it connects (retrying every second until the
// broker is up) and publishes, at most simulatorWindow QoS 1/2 publishes
// unacknowledged. A lost connection is made again; the readings it had
// unacknowledged are not sent again (they are synthetic). errV5Refused
// tells Run to publish at MQTT 3.1.1 instead.
func (s *Simulator) runV5(ctx context.Context) error {
	var p *simV5
	connect := func() error {
		for {
			var err error
			if p, err = s.dialSimV5(ctx); err == nil {
				return nil
			}
			if errors.Is(err, mqtt5.ErrVersionRefused) {
				return errV5Refused
			}
			if !sleepCtx(ctx, time.Second) {
				return ctx.Err()
			}
		}
	}
	if err := connect(); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() { p.close() }()
	s.log.Info("simulator publishing", "broker", s.opts.Broker, "devices", s.opts.Devices, "rate", s.opts.Rate, "protocol_version", 5)
	gen := newReadingGenerator(s.opts)
	pc := s.newPacer()
	defer pc.stop()
	open := 0 // QoS 1/2 publishes unacknowledged on p
	reconnect := func(err error) error {
		s.log.Warn("simulator: connection lost", "error", err)
		p.close()
		open = 0
		return connect()
	}
	for !pc.finished() {
		for pc.due() {
			for s.opts.QoS > 0 && open >= simulatorWindow {
				select {
				case <-p.done:
					open--
				case err := <-p.lost:
					if err := reconnect(err); err != nil {
						return nil
					}
				case <-ctx.Done():
					return nil
				}
			}
			device := gen.devices[gen.next].name // the one reading takes
			topic, payload, _ := gen.reading(s.now().UnixMilli())
			if err := p.publish(topic, device, payload, s.opts.QoS); err != nil {
				if err := reconnect(err); err != nil {
					return nil
				}
				continue
			}
			if s.opts.QoS > 0 {
				open++
			}
			pc.published()
		}
		if pc.finished() {
			break
		}
		select {
		case <-pc.next():
		case err := <-p.lost:
			if err := reconnect(err); err != nil {
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
	// Wait for the outstanding acknowledgements, briefly if ctx ended.
	grace := time.NewTimer(10 * time.Second)
	defer grace.Stop()
	for ; open > 0; open-- {
		select {
		case <-p.done:
		case <-p.lost:
			return nil
		case <-grace.C:
			return nil
		}
	}
	return nil
}
