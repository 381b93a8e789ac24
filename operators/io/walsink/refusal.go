package walsink

import (
	"errors"
	"fmt"
	"time"

	"github.com/eddy-edge/eddy/operators/io/mqtt5"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// ErrQoS2Refused is the refusal Stats.Refusal reports (and the publisher
// logs) when the broker closes the connection right after each QoS 2
// PUBLISH: MQTT 3.1.1's only way to refuse a QoS (AWS IoT Core and Azure
// IoT Hub take QoS 0 and 1 only; mosquitto with max_qos 1 does the same).
var ErrQoS2Refused = errors.New("walsink: the broker does not accept QoS 2: it closes the connection right after each QoS 2 PUBLISH")

// ErrPublishRefused is the QoS 1 mode's refusal: the broker closes the
// connection right after each PUBLISH (AWS IoT Core does so for a topic
// its policy does not allow).
var ErrPublishRefused = errors.New("walsink: the broker refuses this client's publishes: it closes the connection right after each PUBLISH")

// qos2RefusalWindow is how soon after a connection's first PUBLISH a close
// without any PUBREC or PUBCOMP counts as a refusal of the QoS; a broker
// that accepts QoS 2 answers within milliseconds.
const qos2RefusalWindow = 5 * time.Second

// qos2RefusalCloses is how many such connections in a row name the broker
// as refusing QoS 2: the first could be a broker restarting.
const qos2RefusalCloses = 2

// refusalDetector recognises a broker that refuses QoS 2 from the life of
// its connections. It is the publisher goroutine's, not safe for concurrent
// use, and pure: the time comes in.
type refusalDetector struct {
	firstPublish time.Time // of the current connection; zero before one
	acked        bool      // a PUBREC or PUBCOMP on the current connection
	closes       int       // connections in a row closed right after a PUBLISH
}

// connected starts a connection.
func (d *refusalDetector) connected() { d.firstPublish, d.acked = time.Time{}, false }

// published notes a PUBLISH sent at now.
func (d *refusalDetector) published(now time.Time) {
	if d.firstPublish.IsZero() {
		d.firstPublish = now
	}
}

// ackReceived notes a PUBREC or PUBCOMP: the broker takes QoS 2.
func (d *refusalDetector) ackReceived() { d.acked, d.closes = true, 0 }

// closed ends the connection at now and reports whether the broker is now
// known to refuse QoS 2.
func (d *refusalDetector) closed(now time.Time) bool {
	if d.acked || d.firstPublish.IsZero() || now.Sub(d.firstPublish) > qos2RefusalWindow {
		d.closes = 0
		return false
	}
	d.closes++
	return d.closes >= qos2RefusalCloses
}

// connackMeaning says what a CONNACK return code means for this sink and
// what to do about it.
func connackMeaning(code byte) string {
	switch code {
	case packets.ErrRefusedBadProtocolVersion:
		return "unacceptable protocol version (1): the broker does not speak MQTT 3.1.1, which this sink uses"
	case packets.ErrRefusedIDRejected:
		return "identifier rejected (2): the broker does not accept the client id; set client_id to one it allows (unique, at most 23 characters on strict MQTT 3.1.1 brokers)"
	case packets.ErrRefusedServerUnavailable:
		return "server unavailable (3): the broker cannot take the connection now; retrying"
	case packets.ErrRefusedBadUsernameOrPassword:
		return "bad user name or password (4): check the sink's username and password"
	case packets.ErrRefusedNotAuthorised:
		return "not authorized (5): the broker does not let this client connect: check the sink's username and password (mosquitto answers a wrong one so) and the broker's access rules or policy for this client id"
	}
	return fmt.Sprintf("return code %d, not defined by MQTT 3.1.1", code)
}

// connackMeaningV5 says what an MQTT 5 CONNACK reason code means for this
// sink and what to do about it.
func connackMeaningV5(code byte) string {
	name := fmt.Sprintf("%s (%#02x)", mqtt5.ReasonName(code), code)
	switch code {
	case 0x85:
		return name + ": the broker does not accept the client id; set client_id to one it allows"
	case 0x86:
		return name + ": check the sink's username and password"
	case 0x87:
		return name + ": the broker does not let this client connect: check the sink's credentials and the broker's access rules for this client id"
	case 0x88, 0x89, 0x8B, 0x9F:
		return name + ": the broker cannot take the connection now; retrying"
	case 0x8A:
		return name + ": the broker bans this client"
	}
	return name
}
