# Results to a QoS 1 cloud broker, exactly once through the WAL, within the
# limits AWS IoT Core documents (Azure IoT Hub is alike: QoS 0 and 1 only).
#
#   sensors ──TLS──▶ embedded broker ──▶ 1-minute windows ──▶ WAL ──TLS, QoS 1──▶ cloud
#
# It validates as it is, on a machine without any certificate (CI does so):
# paths that `eddy validate` would have to read are either env() settings
# that default to "none" or commented out, each marked "on the device".
#
#   EDDY_CLOUD_BROKER=ssl://a1b2c3d4e5f6g7-ats.iot.eu-west-1.amazonaws.com:8883 \
#   EDDY_CLOUD_CERT=/etc/eddy/cloud/device.pem.crt \
#   EDDY_CLOUD_KEY=/etc/eddy/cloud/private.pem.key \
#     eddy validate -c cloud-qos1.hcl && eddy run -c cloud-qos1.hcl
#
# What reaches the cloud: every result of every completed checkpoint, in
# order per key. QoS 1 has no duplicate-free handshake, so after a crash or
# reconnect the results that were in flight and not yet acknowledged (at
# most max_inflight) are published again, each with the same "id" field: a
# consumer that drops ids it has seen sees each result exactly once (an
# AWS IoT rule into DynamoDB keyed by id does so).

agent {
  # Goes into the client id and topics below: name it like the device's
  # AWS IoT thing.
  device_id = env("EDDY_DEVICE_ID", "gateway-01")
  data_dir  = "./eddy-data"
  admin     = "127.0.0.1:8787" # /readyz, and eddy_wal_* metrics: the backlog while the uplink is down
}

# The sensors' broker, in the agent. Sensors connect with client
# certificates issued by your CA. On the device, listen beyond loopback and
# uncomment the tls block; the files must exist when eddy starts (and when
# `eddy validate` runs), so it is commented out here.
broker {
  listen           = "127.0.0.1:8883" # on the device: "0.0.0.0:8883" with the tls block
  max_inflight     = 1000
  max_message_size = "64KiB" # a sensor's reading; larger ones are refused at the broker
  # tls {
  #   cert = "/etc/eddy/sensors/server.pem"     # the broker's certificate
  #   key  = "/etc/eddy/sensors/server-key.pem"
  #   ca   = "/etc/eddy/sensors/ca.pem"         # sensors must present a certificate issued by it
  # }
}

source "mqtt" "sensors" {
  broker = "embedded"
  topics = ["sensors/+/telemetry"]
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark {
    max_out_of_orderness = "5s"
    idle_timeout         = "1m"
  }
}

# The cloud broker. AWS IoT Core's limits, and what meets each:
#   QoS 0 and 1 only                      qos = 1
#   100 unacknowledged QoS 1 publishes    max_inflight = 100
#   100 publishes/s per connection        buffer { drain_rate = 100 }
#   128 KB payload                        max_payload = "128KiB" (larger results are dead-lettered)
#   7 slashes in a topic                  max_topic_levels = 8 (eddy validate warns beyond)
#   128-byte client id                    client_id below: the device id
sink "mqtt" "cloud" {
  # Your account's ATS endpoint (aws iot describe-endpoint --endpoint-type iot:Data-ATS).
  broker    = env("EDDY_CLOUD_BROKER", "ssl://a1b2c3d4e5f6g7-ats.iot.eu-west-1.amazonaws.com:8883")
  # The thing name, as AWS IoT policies usually require
  # (iot:Connect on client/${iot:Connection.Thing.ThingName}).
  client_id = "${device_id}"
  # The key is in the payload; a topic without ${key} keeps its level count
  # fixed (a key may contain "/").
  topic            = "dt/eddy/${device_id}/${pipeline}"
  delivery         = "exactly_once"
  qos              = 1
  max_inflight     = 100
  max_payload      = "128KiB"
  max_topic_levels = 8
  drain_timeout    = "30s"
  tls {
    # The ATS endpoint's chain (Amazon Root CA 1) is in the system roots:
    # ca = "" uses them.
    ca = ""
    # On the device: the thing's certificate and key, from
    # aws iot create-keys-and-certificate. Without them the cloud refuses
    # the connection; results wait in the WAL until it accepts one.
    cert = env("EDDY_CLOUD_CERT", "")
    key  = env("EDDY_CLOUD_KEY", "")
  }
  buffer {
    max_disk   = "1GiB" # about a day of 1-minute results from 1,500 sensors (~300 bytes each)
    when_full  = "block"
    drain_rate = 100 # messages/s, also when catching up after an outage
  }
}

# Readings that cannot be processed, and results over max_payload.
sink "file" "dead" {
  path = "dead-letter.jsonl"
}

pipeline "temp_1m" {
  from   = source.mqtt.sensors
  filter = event.temp != null
  key    = event.device
  window "tumbling" { size = "1m" }
  aggregate {
    n        = count()
    avg_temp = avg(event.temp)
    max_temp = max(event.temp)
  }
  to          = [sink.mqtt.cloud]
  dead_letter = sink.file.dead
}

checkpoint {
  interval = "10s" # results go upstream once their checkpoint completes
}
