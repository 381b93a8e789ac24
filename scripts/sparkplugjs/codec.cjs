// Eddy's Sparkplug interop check: decodes and encodes Sparkplug B payloads
// with Cirrus Link's sparkplug-payload (the Eclipse Tahu JavaScript codec).
//
//   node codec.cjs NODE_MODULES_DIR < request.json > response.json
//
// request:  {"decode": [base64, ...], "encode": [payload object, ...]}
// response: {"decoded": [payload, ...], "encoded": [base64, ...]}
//
// 64-bit integers (Long objects) are written as decimal strings and bytes
// as {"base64": ...}, so no value passes through a float on the way; a
// payload to encode gives its bytes values (a metric's value, the body) the
// same way.
"use strict";
const path = require("path");
const sparkplug = require(path.join(process.argv[2], "sparkplug-payload")).get("spBv1.0");
const Long = require(path.join(process.argv[2], "long"));

function plain(v) {
  if (v === null || v === undefined) return v;
  if (Long.isLong(v)) return v.toString();
  if (v instanceof Uint8Array) return { base64: Buffer.from(v).toString("base64") };
  if (Array.isArray(v)) return v.map(plain);
  if (typeof v === "object") {
    const o = {};
    for (const k of Object.keys(v)) o[k] = plain(v[k]);
    return o;
  }
  return v;
}

// bytes turns {"base64": ...} back into the bytes it stands for.
function bytes(v) {
  if (v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) return v.map(bytes);
  const keys = Object.keys(v);
  if (keys.length === 1 && keys[0] === "base64") return Buffer.from(v.base64, "base64");
  const o = {};
  for (const k of keys) o[k] = bytes(v[k]);
  return o;
}

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (c) => { input += c; });
process.stdin.on("end", () => {
  const req = JSON.parse(input);
  const out = { decoded: [], encoded: [] };
  for (const b64 of req.decode || []) {
    out.decoded.push(plain(sparkplug.decodePayload(Buffer.from(b64, "base64"))));
  }
  for (const p of req.encode || []) {
    out.encoded.push(Buffer.from(sparkplug.encodePayload(bytes(p))).toString("base64"));
  }
  process.stdout.write(JSON.stringify(out));
});
