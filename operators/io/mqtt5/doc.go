// Package mqtt5 holds the parts of MQTT 5 that Eddy's own MQTT 5 clients
// share: the WAL sink's publisher (operators/io/walsink) and the MQTT
// source's connection (operators/io/source). Both frame their packets with
// mochi-mqtt's packets codec, the embedded broker's own and so already a
// dependency; this package adds what a client needs on top of it: the
// CONNECT a session-keeping client sends (Connect), the reading and
// decoding of what a broker sends (ReadPacket, Decode), what a CONNACK
// means and announces (ParseConnack, Limits), the names of reason codes
// (ReasonName), and the dialling of a broker URL (Dial). Properties are
// walked with package operators/mqttprops, which is pure, so the
// pipeline's stages read a message's properties with it too.
//
// The session logic stays with each client: the sink keeps its flows in its
// WAL, the source acknowledges a message only after its ingest-log append.
package mqtt5
