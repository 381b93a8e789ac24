// Publishes messages with MQTT.js at MQTT 5: scripts/mqttjs runs it. The
// first line on stdin is the connection, {"broker": "mqtt://127.0.0.1:1883",
// "clientId": "…"}; each further line a batch, [{"topic": "…", "payload":
// "…", "qos": 1, "userProperties": {"site": "north"}, "contentType": "…"}],
// published in order (MQTT.js writes them in call order, without waiting
// for each acknowledgement); once all of a batch are acknowledged it writes
// {"published": N} to stdout. It disconnects at the end of stdin.
"use strict";
const path = require("path");
const readline = require("readline");
const mqtt = require(path.join(process.argv[2], "mqtt"));

async function main() {
  const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const first = await lines.next();
  const req = JSON.parse(first.value);
  const client = await mqtt.connectAsync(req.broker, {
    protocolVersion: 5,
    clientId: req.clientId,
    clean: true,
    reconnectPeriod: 0,
    connectTimeout: 10000,
  });
  for (let line = await lines.next(); !line.done; line = await lines.next()) {
    const batch = JSON.parse(line.value);
    await Promise.all(
      batch.map((m) => {
        const properties = {};
        if (m.userProperties) properties.userProperties = m.userProperties;
        if (m.contentType) properties.contentType = m.contentType;
        return client.publishAsync(m.topic, m.payload, { qos: m.qos, properties });
      }),
    );
    process.stdout.write(JSON.stringify({ published: batch.length }) + "\n");
  }
  await client.endAsync();
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + "\n");
  process.exit(1);
});
