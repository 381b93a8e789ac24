package mqtt5

import "fmt"

// reasonNames are the MQTT 5 reason codes a broker sends (CONNACK, PUBACK,
// PUBREC, PUBREL, PUBCOMP, SUBACK, DISCONNECT), by the names the
// specification gives them, in the style of a metric label.
var reasonNames = map[byte]string{
	0x00: "success",
	0x01: "granted_qos_1",
	0x02: "granted_qos_2",
	0x04: "disconnect_with_will_message",
	0x10: "no_matching_subscribers",
	0x80: "unspecified_error",
	0x81: "malformed_packet",
	0x82: "protocol_error",
	0x83: "implementation_specific_error",
	0x84: "unsupported_protocol_version",
	0x85: "client_identifier_not_valid",
	0x86: "bad_user_name_or_password",
	0x87: "not_authorized",
	0x88: "server_unavailable",
	0x89: "server_busy",
	0x8A: "banned",
	0x8B: "server_shutting_down",
	0x8C: "bad_authentication_method",
	0x8D: "keep_alive_timeout",
	0x8E: "session_taken_over",
	0x8F: "topic_filter_invalid",
	0x90: "topic_name_invalid",
	0x91: "packet_identifier_in_use",
	0x92: "packet_identifier_not_found",
	0x93: "receive_maximum_exceeded",
	0x94: "topic_alias_invalid",
	0x95: "packet_too_large",
	0x96: "message_rate_too_high",
	0x97: "quota_exceeded",
	0x98: "administrative_action",
	0x99: "payload_format_invalid",
	0x9A: "retain_not_supported",
	0x9B: "qos_not_supported",
	0x9C: "use_another_server",
	0x9D: "server_moved",
	0x9E: "shared_subscriptions_not_supported",
	0x9F: "connection_rate_exceeded",
	0xA0: "maximum_connect_time",
	0xA1: "subscription_identifiers_not_supported",
	0xA2: "wildcard_subscriptions_not_supported",
}

// ReasonName is code's name, e.g. "not_authorized", or "reason_0xNN" for a
// code MQTT 5 does not define.
func ReasonName(code byte) string {
	if n, ok := reasonNames[code]; ok {
		return n
	}
	return fmt.Sprintf("reason_%#02x", code)
}
