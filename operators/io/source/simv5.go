package source

// The simulator's MQTT 5 publisher, on mochi's packets codec as the
// source's MQTT 5 connection. Its readings carry the content type
// application/json and the user property "sensor" (the device's name), so
// a pipeline on the simulator can read meta.content_type and
// meta.user_properties.sensor.

import (
	"context"
	"errors"
	"fmt"
	"time"

	mp "github.com/mochi-mqtt/server/v2/packets"

	"github.com/eddy-edge/eddy/operators/io/mqtt5"
)

// simV5 is one MQTT 5 connection of the simulator, on an mqtt5.Session.
type simV5 struct {
	s    *mqtt5.Session
	pk   mp.Packet // the publisher's, reused
	user [1]mp.UserProperty
	id   uint16
	// done receives one value per QoS 1/2 publish the broker completed
	// (PUBACK, PUBCOMP); lost the session's end.
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
	sess, _, err := mqtt5.Open(ctx, c, mqtt5.Config{
		Connect:  mqtt5.Connect{ClientID: s.opts.ClientID, Username: s.opts.Username, Password: s.opts.Password, CleanStart: true},
		Deadline: time.Now().Add(connectTimeout),
	})
	var refused *mqtt5.RefusedError
	switch {
	case err == nil:
	case errors.Is(err, mqtt5.ErrVersionRefused), errors.As(err, &refused):
		return nil, err
	default:
		return nil, fmt.Errorf("%w (no CONNACK: %v)", mqtt5.ErrVersionRefused, err)
	}
	p := &simV5{s: sess, done: make(chan struct{}, simulatorWindow), lost: make(chan error, 1)}
	go func() { p.lost <- sess.Run(p.answer) }()
	return p, nil
}

// answer takes the broker's answers: a PUBACK or PUBCOMP completes a
// publish, a PUBREC gets its PUBREL.
func (p *simV5) answer(pk *mp.Packet) error {
	switch pk.FixedHeader.Type {
	case mp.Puback, mp.Pubcomp:
		p.done <- struct{}{}
	case mp.Pubrec:
		rel := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Pubrel, Qos: 1}, ProtocolVersion: 5, PacketID: pk.PacketID}
		return p.s.WritePacket(rel.PubrelEncode)
	}
	return nil
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
	return p.s.WritePacket(p.pk.PublishEncode)
}

func (p *simV5) close() { p.s.Disconnect(0) }

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
