// The aedes broker Eddy's tests run against (scripts/aedes): one TCP
// listener on 127.0.0.1, aedes' default in-memory persistence (sessions and
// their stored QoS 1/2 messages last as long as this process).
//
//   node broker.mjs NODE_MODULES_DIR PORT [PUBLISH_LOG_FILTER]
//
// With PUBLISH_LOG_FILTER (a topic filter), every message published to a
// matching topic is logged as aedes routes it: "published TOPIC PAYLOAD"
// (aedes publishes a QoS 2 message on receipt, before its PUBREC).
//
// aedes is imported by path from NODE_MODULES_DIR: the modules are installed
// in a cache folder (scripts/install-deps.sh), not next to this script.
import net from 'node:net'
import path from 'node:path'
import { pathToFileURL } from 'node:url'

const [modules, port, publogs] = process.argv.slice(2)
const { Aedes } = await import(pathToFileURL(path.join(modules, 'aedes', 'aedes.js')).href)
const broker = await Aedes.createBroker()
const log = (...a) => console.log(new Date().toISOString(), ...a)
broker.on('client', c => log('client connected', c.id))
broker.on('clientDisconnect', c => log('client disconnected', c.id))
// A killed client fails every write queued to it: log its first error only.
const failed = new WeakSet()
broker.on('clientError', (c, err) => {
  if (!failed.has(c)) {
    failed.add(c)
    log('client error', c.id, err.message)
  }
})
broker.on('subscribe', (subs, c) => log('subscribe', c && c.id, subs.map(s => s.topic + '@' + s.qos).join(' ')))
if (publogs) {
  // A listener of the broker's own: aedes calls it as it routes the
  // message, before it writes the message to any subscriber (its 'publish'
  // event comes after, and a process stopped in between would not log it).
  broker.subscribe(publogs, (packet, cb) => {
    log('published', packet.topic, packet.payload.toString())
    cb()
  })
}
const server = net.createServer(broker.handle)
server.listen(Number(port), '127.0.0.1', () => log('aedes listening on 127.0.0.1:' + port))
// In-memory sessions die with the process anyway: exit at once rather
// than wait for connected clients to leave.
const stop = () => process.exit(0)
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
