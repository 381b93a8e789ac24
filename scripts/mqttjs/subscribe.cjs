// Subscribes with MQTT.js at MQTT 5: scripts/mqttjs runs it as
//
//   node subscribe.cjs NODE_MODULES_DIR BROKER_URL CLIENT_ID TOPIC_FILTER QOS
//
// It connects with a clean start, subscribes to TOPIC_FILTER at QOS and,
// once the broker granted it, writes {"subscribed": true} to stdout; then
// one line per message received: {"topic": "…", "payload": "…", "qos": 2,
// "userProperties": {"id": "…"}, "contentType": "…",
// "messageExpiryInterval": 3600}, the last three from the PUBLISH's
// properties as MQTT.js decodes them (absent when the PUBLISH has none). It
// runs until it is killed or the connection ends.
"use strict";
const path = require("path");
const mqtt = require(path.join(process.argv[2], "mqtt"));
const [broker, clientId, filter, qos] = process.argv.slice(3);

const write = (v) => process.stdout.write(JSON.stringify(v) + "\n");

async function main() {
  const client = await mqtt.connectAsync(broker, {
    protocolVersion: 5,
    clientId,
    clean: true,
    reconnectPeriod: 0,
    connectTimeout: 10000,
  });
  client.on("message", (topic, payload, packet) => {
    const p = packet.properties || {};
    write({
      topic,
      payload: payload.toString(),
      qos: packet.qos,
      userProperties: p.userProperties,
      contentType: p.contentType,
      messageExpiryInterval: p.messageExpiryInterval,
    });
  });
  client.on("close", () => process.exit(0));
  const granted = await client.subscribeAsync(filter, { qos: Number(qos) });
  if (granted.some((g) => g.qos >= 0x80)) {
    throw new Error("subscription refused: " + JSON.stringify(granted));
  }
  write({ subscribed: true });
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + "\n");
  process.exit(1);
});
