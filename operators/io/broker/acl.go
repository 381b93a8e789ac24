package broker

import (
	"crypto/tls"
	"strings"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Refusal is a reason the broker refuses a client something, counted by
// Broker.Refused.
type Refusal int

// The refusals counted.
const (
	// RefusedACLPublish: a publish to a topic outside the client's acl.
	RefusedACLPublish Refusal = iota
	// RefusedACLSubscribe: a subscription (one filter of a SUBSCRIBE)
	// outside the client's acl, or to $SYS.
	RefusedACLSubscribe
	// RefusedTLS: a TLS handshake that failed, typically a client without
	// a certificate or with one of another CA.
	RefusedTLS
	// RefusedCredentials: a connection with a wrong username or password.
	RefusedCredentials
	numRefusals
)

// Refusals lists every Refusal, for exporting them all.
var Refusals = []Refusal{RefusedACLPublish, RefusedACLSubscribe, RefusedTLS, RefusedCredentials}

// String is the refusal's name as a metric label: acl_publish,
// acl_subscribe, tls, credentials.
func (r Refusal) String() string {
	switch r {
	case RefusedACLPublish:
		return "acl_publish"
	case RefusedACLSubscribe:
		return "acl_subscribe"
	case RefusedTLS:
		return "tls"
	case RefusedCredentials:
		return "credentials"
	}
	return "unknown"
}

// Refused returns how many times the broker refused a client for reason r.
func (b *Broker) Refused(r Refusal) uint64 {
	if r < 0 || r >= numRefusals {
		return 0
	}
	return b.hook.refused[r].Load()
}

// OnACLCheck decides a client's publish (write) and its subscriptions:
// mochi asks for each filter of a SUBSCRIBE and again for each message it
// would deliver on one, with the message's topic. The agent's own clients
// (internal listener) may do anything. A refused publish is refused by
// mochi: for MQTT 5 with reason "not authorized", for 3.1.1 (which has no
// such reason) by closing the connection when QoS > 0; a refused filter
// gets a failure code in the SUBACK; a refused delivery is dropped. The
// refusals are counted and logged by OnPacketRead and OnSubscribe, which
// see the packets.
func (h *hook) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	if cl.Net.Inline || internal(cl) {
		return true
	}
	if write {
		return h.mayPublish(cl, topic)
	}
	return h.mayRead(cl, topic)
}

// mayPublish reports whether cl may publish to topic: anywhere without
// acls, else where its acl's publish filters match.
func (h *hook) mayPublish(cl *mqtt.Client, topic string) bool {
	if len(h.acls) == 0 {
		return true
	}
	acl, id := h.aclOf(cl)
	if acl == nil {
		return false
	}
	for _, f := range acl.Publish {
		if matchFilter(expandIdentity(f, id), topic) {
			return true
		}
	}
	return false
}

// mayRead reports whether cl may subscribe to filter, or receive a message
// on the topic filter: without acls, to everything but the topics
// starting with '$' ($SYS: the broker's load and clients); with acls, to
// what one of its acl's subscribe filters covers ($SYS only when one names
// it). A shared subscription is judged by the filter it shares.
func (h *hook) mayRead(cl *mqtt.Client, filter string) bool {
	filter = unshared(filter)
	if len(h.acls) == 0 {
		return !strings.HasPrefix(filter, "$")
	}
	acl, id := h.aclOf(cl)
	if acl == nil {
		return false
	}
	for _, f := range acl.Subscribe {
		if filterCovers(expandIdentity(f, id), filter) {
			return true
		}
	}
	return false
}

// aclOf returns cl's acl and identity, or a nil acl when it has none or
// its identity cannot be used in a filter.
func (h *hook) aclOf(cl *mqtt.Client) (*ACL, string) {
	id := identity(cl)
	if id == "" || strings.ContainsAny(id, "+#/") {
		return nil, id // would not name one subtree
	}
	return h.aclFor(id), id
}

// expandIdentity is the acl filter f for the client of identity id.
func expandIdentity(f, id string) string {
	if !strings.Contains(f, usernameVar) {
		return f // no allocation
	}
	return strings.ReplaceAll(f, usernameVar, id)
}

// aclFor is the ACL of identity id, else the "*" one, else nil.
func (h *hook) aclFor(id string) *ACL {
	var wildcard *ACL
	for i := range h.acls {
		switch h.acls[i].User {
		case id:
			return &h.acls[i]
		case "*":
			wildcard = &h.acls[i]
		}
	}
	return wildcard
}

// identity is the common name of the client's verified certificate, else
// its MQTT username.
func identity(cl *mqtt.Client) string {
	if tc, ok := cl.Net.Conn.(*tls.Conn); ok {
		if chains := tc.ConnectionState().VerifiedChains; len(chains) > 0 && len(chains[0]) > 0 {
			return chains[0][0].Subject.CommonName
		}
	}
	return string(cl.Properties.Username)
}

// OnPacketRead counts and logs a publish its acl refuses, as mochi will
// (OnACLCheck): here the packet's size is known. The line is bounded (the
// topic and client id cut, never the payload) and rate limited; mochi's
// own record of the refusal, which holds the whole packet, is dropped
// (mochiHandler).
func (h *hook) OnPacketRead(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.FixedHeader.Type != packets.Publish || len(h.acls) == 0 || cl.Net.Inline || internal(cl) {
		return pk, nil
	}
	if !mqtt.IsValidFilter(pk.TopicName, true) || h.mayPublish(cl, pk.TopicName) {
		return pk, nil // mochi drops an invalid topic before asking
	}
	n := h.refused[RefusedACLPublish].Add(1)
	h.logLimited(RefusedACLPublish.String(), "broker: publish refused: topic outside the client's acl",
		"client", cut(cl.ID), "identity", cut(identity(cl)), "topic", cut(pk.TopicName),
		"bytes", len(pk.Payload), "qos", pk.FixedHeader.Qos, "reason", RefusedACLPublish.String(), "refused_total", n)
	return pk, nil
}

// OnSubscribe counts and logs each filter of a SUBSCRIBE that OnACLCheck
// will refuse (bounded, rate limited). The packet goes on unchanged.
func (h *hook) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if cl.Net.Inline || internal(cl) {
		return pk
	}
	for _, sub := range pk.Filters {
		if !mqtt.IsValidFilter(sub.Filter, false) || h.mayRead(cl, sub.Filter) {
			continue
		}
		n := h.refused[RefusedACLSubscribe].Add(1)
		h.logLimited(RefusedACLSubscribe.String(), "broker: subscription refused: filter outside the client's acl",
			"client", cut(cl.ID), "identity", cut(identity(cl)), "filter", cut(sub.Filter),
			"reason", RefusedACLSubscribe.String(), "refused_total", n)
	}
	return pk
}
