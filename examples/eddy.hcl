# Eddy's configuration: the template the packages install as
# /etc/eddy/eddy.hcl. It validates as it is, and it is a real starting point,
# not a demo: readings from the MQTT broker already on this device, one
# event-time window per sensor, results on disk exactly once. Edit it, then:
#
#   sudo eddy validate -c /etc/eddy/eddy.hcl
#   sudo systemctl enable --now eddy
#   journalctl -u eddy -f                 # its log
#   curl -s 127.0.0.1:8787/api/pipelines  # what it is doing
#
# Every block and option, with its default: examples/full.hcl in the source,
# or docs/configuration.md.

agent {
  # Default: derived from /etc/machine-id (never the raw id). Set it to name
  # devices your way; it goes into client ids, topics and S3 prefixes.
  # device_id = "gateway-01"
  data_dir = "/var/lib/eddy"
  admin    = "127.0.0.1:8787" # health, metrics, status page; loopback only
}

# Sensors publish {"device":"…","ts":<ms>,"temp":…} to sensors/<device>/telemetry
# on this device's broker (mosquitto: persistence true, max_inflight_messages 1000).
source "mqtt" "sensors" {
  broker = "tcp://127.0.0.1:1883"
  topics = ["sensors/+/telemetry"]
  qos    = 1
  format = "json"
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark {
    max_out_of_orderness = "5s" # how late a reading may arrive and still be on time
    idle_timeout         = "1m"
  }
}

# Results, committed at each checkpoint: exactly once, on disk.
sink "file" "results" {
  path     = "results" # a directory of part files, one per checkpoint; relative to data_dir
  delivery = "exactly_once"
}

# Readings too late even for allowed_lateness.
sink "file" "late" {
  path = "late.jsonl"
}

pipeline "temp_1m" {
  from   = source.mqtt.sensors
  filter = event.temp != null
  key    = event.device
  window "tumbling" {
    size             = "1m"
    allowed_lateness = "30s" # a reading this late re-fires its window (late_update)
  }
  aggregate {
    n        = count()
    avg_temp = avg(event.temp)
    min_temp = min(event.temp)
    max_temp = max(event.temp)
  }
  to          = [sink.file.results]
  late_output = sink.file.late
}

checkpoint {
  interval = "10s"
}

# Upstream delivery, exactly once, buffered on disk while the uplink is down:
#
# sink "mqtt" "cloud" {
#   broker   = "ssl://broker.example.com:8883"
#   topic    = "sites/${device_id}/${pipeline}/${key}"
#   delivery = "exactly_once"
# }
#
# Checkpoints to S3, so a replacement device restores this one's state:
#
# upload "s3" {
#   endpoint = "s3.example.com"
#   bucket   = "eddy"
#   prefix   = "${device_id}/"
# }
