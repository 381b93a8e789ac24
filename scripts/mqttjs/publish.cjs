// Publishes the messages of the JSON request on stdin with MQTT.js, at MQTT
// 5, and exits once every one is acknowledged: scripts/mqttjs runs it.
//
//	{"broker": "mqtt://127.0.0.1:1883", "clientId": "…",
//	 "messages": [{"topic": "…", "payload": "…", "qos": 1,
//	               "userProperties": {"site": "north"}, "contentType": "…"}]}
"use strict";
const path = require("path");
const mqtt = require(path.join(process.argv[2], "mqtt"));

let input = "";
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", async () => {
  const req = JSON.parse(input);
  const client = await mqtt.connectAsync(req.broker, {
    protocolVersion: 5,
    clientId: req.clientId,
    clean: true,
    reconnectPeriod: 0,
    connectTimeout: 10000,
  });
  for (const m of req.messages) {
    const properties = {};
    if (m.userProperties) properties.userProperties = m.userProperties;
    if (m.contentType) properties.contentType = m.contentType;
    await client.publishAsync(m.topic, m.payload, { qos: m.qos, properties });
  }
  await client.endAsync();
  process.stdout.write(JSON.stringify({ published: req.messages.length }) + "\n");
});
