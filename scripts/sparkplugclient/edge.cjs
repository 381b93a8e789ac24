// Eddy's Sparkplug source test edge node: Cirrus Link's sparkplug-client
// (Eclipse Tahu's JavaScript edge node) publishing one node with one
// device, "dev1", whose metrics are temp (Double, alias 1) and count
// (Int64, alias 2).
//
//   node edge.cjs NODE_MODULES_DIR SERVER_URL GROUP NODE CLIENT_ID
//
// Commands, one JSON object per line on stdin:
//   {"op":"births","ts":MS,"temp":V}   NBIRTH and the DBIRTH of dev1
//   {"op":"data","ts":MS,"temp":V}     DDATA of dev1, temp by its alias only
//   {"op":"gap"}                       skip one seq number
//   {"op":"rebirth","ts":MS,"temp":V}  the births to send when an NCMD
//                                      Node Control/Rebirth = true comes
//   {"op":"stop"}                      NDEATH, disconnect, exit
// Events, one line each on stdout: "connected", "done N" after the Nth
// command, "ncmd rebirth" when the births were sent again on an NCMD.
"use strict";
const path = require("path");
const readline = require("readline");
const sparkplug = require(path.join(process.argv[2], "sparkplug-client"));

const [url, groupId, edgeNode, clientId] = process.argv.slice(3);
const client = sparkplug.newClient({
  serverUrl: url, username: "", password: "", groupId, edgeNode, clientId,
  publishDeath: true, version: "spBv1.0",
});
let rebirth = null;
let done = 0;

function births(ts, temp) {
  client.publishNodeBirth({ timestamp: ts, metrics: [
    { name: "Node Control/Rebirth", type: "Boolean", value: false },
  ] });
  client.publishDeviceBirth("dev1", { timestamp: ts, metrics: [
    { name: "temp", alias: 1, type: "Double", value: temp },
    { name: "count", alias: 2, type: "Int64", value: 0 },
  ] });
}

client.on("birth", () => {
  console.log("connected");
  const rl = readline.createInterface({ input: process.stdin });
  rl.on("line", (line) => {
    const c = JSON.parse(line);
    switch (c.op) {
      case "births": births(c.ts, c.temp); break;
      case "data":
        client.publishDeviceData("dev1", { timestamp: c.ts, metrics: [
          { alias: 1, type: "Double", value: c.temp, timestamp: c.ts },
        ] });
        break;
      case "gap": client.seq++; break;
      case "rebirth": rebirth = c; break;
      case "stop":
        // stop publishes the NDEATH and ends the connection once it is out.
        client.client.once("end", () => process.exit(0));
        client.stop();
        return;
    }
    console.log("done " + ++done);
  });
});

client.on("ncmd", (payload) => {
  for (const m of payload.metrics || []) {
    if (m.name === "Node Control/Rebirth" && m.value === true && rebirth) {
      births(rebirth.ts, rebirth.temp);
      console.log("ncmd rebirth");
    }
  }
});
client.on("error", (e) => { console.error(String(e)); process.exit(2); });
