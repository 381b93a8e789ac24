package config

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Broker is the broker block: an embedded MQTT broker for local sensors,
// which sources and sinks reach with broker = "embedded".
type Broker struct {
	// Listen is the TCP listen address, required. Beyond loopback it needs
	// Username and Password, or TLS with a CA (client certificates).
	Listen             string
	Username, Password string
	TLS                *TLS
	// MaxInflight is the per-client in-flight window. Default 1000.
	MaxInflight int
	// MaxMessageSize bounds a published payload; a client sending more is
	// disconnected. Default as MQTTSource.MaxMessageSize.
	MaxMessageSize   int64
	maxMessageSizeAt *hcl.Range
	// MaxClients bounds the clients connected at once. Default 1000.
	MaxClients int
	// MaxMessagesPerSecond bounds each client connection's publishes (a
	// token bucket holding MaxMessagesBurst, default one second's worth);
	// a faster client's publishes are delayed to the rate. 0 (default):
	// unlimited.
	MaxMessagesPerSecond, MaxMessagesBurst int
	// ACLs, when any, bound what each client may publish and subscribe to;
	// without any, every client may publish everywhere and subscribe to
	// everything but $SYS.
	ACLs      []BrokerACL
	DeclRange hcl.Range
}

func (d *decoder) decodeBroker(b *hcl.Block) *Broker {
	a, c := d.content(b, []string{"listen", "username", "password", "max_inflight", "max_message_size", "max_clients",
		"max_messages_per_second", "max_messages_burst"}, tlsBlock, aclBlock)
	br := &Broker{
		Listen:      a.str("listen", noVars, ""),
		Username:    a.str("username", noVars, ""),
		Password:    a.str("password", noVars, ""),
		TLS:         d.decodeTLS(c.Blocks, true),
		MaxInflight: int(a.integer("max_inflight", 1000, 1, 65535)),
		MaxClients:  int(a.integer("max_clients", 1000, 1, 1<<31-1)),
		DeclRange:   b.DefRange,
	}
	br.MaxMessageSize, br.maxMessageSizeAt = a.messageSize()
	br.MaxMessagesPerSecond = int(a.integer("max_messages_per_second", 0, 0, 1_000_000))
	br.MaxMessagesBurst = int(a.integer("max_messages_burst", int64(br.MaxMessagesPerSecond), 1, 1_000_000))
	if a.m["max_messages_burst"] != nil && br.MaxMessagesPerSecond == 0 {
		d.errorf(a.rangeOf("max_messages_burst"), "Burst without rate",
			"max_messages_burst is the burst of max_messages_per_second; set max_messages_per_second too, or remove it.")
	}
	for _, blk := range c.Blocks {
		if blk.Type == "acl" {
			br.ACLs = append(br.ACLs, d.decodeACL(blk))
		}
	}
	if !a.require("listen") {
		return br
	}
	if err := validateListen(br.Listen); err != nil {
		d.errorf(a.rangeOf("listen"), "Invalid address", "%q is not a host:port listen address, e.g. \"127.0.0.1:1883\".", br.Listen)
		return br
	}
	if (br.Username == "") != (br.Password == "") {
		d.errorf(b.DefRange, "Incomplete credentials", "Set both \"username\" and \"password\" on the broker, or neither.")
	}
	if lo, _ := isLoopback(br.Listen); !lo && (br.Username == "" || br.Password == "") && (br.TLS == nil || br.TLS.CA == "") {
		d.errorf(a.rangeOf("listen"), "Open broker beyond loopback",
			"%q accepts connections from the network; set username and password, add a tls block with a ca (client certificates are then required), or listen on 127.0.0.1.", br.Listen)
	}
	return br
}

// BrokerACL is an acl block of the broker: the topics one client may
// publish to and subscribe to.
type BrokerACL struct {
	// User is the client's identity: the common name of its certificate
	// when the broker requires client certificates (tls { ca }), else its
	// MQTT username; "*" is every client without an acl of its own.
	User string
	// Publish are MQTT filters (+ and #) the client may publish to; they
	// may hold ${username} (the identity) and ${device_id}.
	Publish []string
	// Subscribe are the MQTT filters the client may subscribe within (a
	// subscription must be covered by one of them: "sensors/${username}/#"
	// allows "sensors/${username}/cmd" but not "#"), with the same
	// variables. None: the client may not subscribe. $SYS only when named.
	Subscribe []string
}

var aclBlock = hcl.BlockHeaderSchema{Type: "acl"}

func (d *decoder) decodeACL(b *hcl.Block) BrokerACL {
	a, _ := d.content(b, []string{"user", "publish", "subscribe"})
	a.require("user")
	acl := BrokerACL{User: a.str("user", noVars, "")}
	acl.Publish = d.aclFilters(a, "publish")
	acl.Subscribe = d.aclFilters(a, "subscribe")
	if !a.has("publish") && !a.has("subscribe") {
		d.errorf(b.DefRange, "Empty acl",
			"An acl grants what its publish and subscribe filters list; add one, e.g. publish = [\"sensors/${username}/#\"], or remove the acl.")
	}
	return acl
}

// aclFilters decodes the acl filter list name, each checked as an MQTT
// filter at its own position.
func (d *decoder) aclFilters(a attrs, name string) []string {
	filters, ranges, _ := a.strList(name, aclVars)
	for i, f := range filters {
		if err := validateTopicFilter(f); err != nil {
			d.errorf(ranges[i], "Invalid topic filter", "%q: %s.", f, strings.TrimPrefix(err.Error(), "config: "))
		}
	}
	return filters
}
