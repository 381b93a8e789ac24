package broker

import (
	"crypto/subtle"
	"log/slog"
	"sync/atomic"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// hook connects mochi to Eddy: it authenticates clients and hands every
// publish to the subscribers before mochi acknowledges it.
type hook struct {
	mqtt.HookBase
	server   *mqtt.Server
	subs     *subscribers
	log      *slog.Logger
	username []byte // nil: allow every client
	password []byte
	rejected atomic.Uint64
}

func (h *hook) ID() string { return "eddy" }

func (h *hook) Provides(b byte) bool {
	return b == mqtt.OnConnectAuthenticate || b == mqtt.OnACLCheck || b == mqtt.OnPublish
}

// OnConnectAuthenticate allows exactly the configured credentials, compared
// in constant time, or every client when none are configured.
func (h *hook) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	if h.username == nil {
		return true
	}
	userOK := subtle.ConstantTimeCompare(pk.Connect.Username, h.username) == 1
	passOK := subtle.ConstantTimeCompare(pk.Connect.Password, h.password) == 1
	return userOK && passOK
}

// OnACLCheck allows every authenticated client to publish and subscribe to
// every topic: the broker serves one device's sensors.
func (h *hook) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool { return true }

// OnPublish runs the subscribers before mochi acknowledges the publish.
func (h *hook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	err := h.subs.deliver(pk.TopicName, pk.Payload)
	if err == nil {
		return pk, nil
	}
	n := h.rejected.Add(1)
	h.log.Warn("broker: publish rejected by subscriber",
		"client", cl.ID, "topic", pk.TopicName, "qos", pk.FixedHeader.Qos, "rejected_total", n, "error", err)
	if pk.FixedHeader.Qos > 0 {
		// No acknowledgement goes out; closing the connection makes the
		// sensor re-send the message when it reconnects instead of waiting
		// for a PUBACK forever. MQTT 3.1.1 has no server DISCONNECT packet.
		if cl.Properties.ProtocolVersion == 5 {
			_ = h.server.DisconnectClient(cl, packets.ErrImplementationSpecificError)
		} else {
			cl.Stop(packets.ErrImplementationSpecificError)
		}
	}
	return pk, packets.ErrRejectPacket
}
