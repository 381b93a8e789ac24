// Package mqtt5 is the MQTT 5 client session Eddy's own MQTT 5 clients run
// on: the MQTT source's connection (operators/io/source), the WAL sink's
// publisher (operators/io/walsink), the Sparkplug sink's link
// (operators/io/sparkplug) and the simulator. Packets are framed with
// mochi-mqtt's packets codec, the embedded broker's own and so already a
// dependency.
//
// Session is one connection: Open sends the CONNECT (Connect) and reads
// the CONNACK (what it announces: Connack, Limits; a refusal: RefusedError,
// ErrVersionRefused, ErrNoConnack), Run reads the broker's packets and
// hands them to the client, with the PINGREQs and the read deadline of the
// keepalive when the client asks for them, Write serializes the client's
// packets, Disconnect and Close end it, and a DISCONNECT from the broker
// ends it with its reason (DisconnectError, ReasonName). Dial opens the
// connection to a broker URL. ReadPacket and Decode read what a broker
// sends. Properties are walked with package operators/mqttprops, which is
// pure, so the pipeline's stages read a message's properties with it too.
//
// What a client does with the packets stays with it: the source
// acknowledges a message only after its ingest-log append and resolves
// topic aliases, the WAL sink keeps its QoS 1 and 2 flows in its WAL, the
// Sparkplug sink waits for the PUBACK of each QoS 1 publish.
package mqtt5
