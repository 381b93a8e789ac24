# The production shape: sensors on the site's mosquitto → event-time windows
# → results exactly once to the cloud broker over TLS, buffered on disk while
# the uplink is down → checkpoints to S3, so a replacement device restores
# this one's state.
#
# Sensors publish {"device":"…","ts":<ms>,"temp":…,"humidity":…} to
# sensors/<device>/telemetry. Set the environment (systemd: an
# EnvironmentFile, or `systemctl edit eddy`), then:
#
#   eddy validate -c examples/upstream-s3.hcl
#   eddy run -c examples/upstream-s3.hcl
#
# A replacement device with the same device_id restores from the bucket:
#
#   eddy restore -c examples/upstream-s3.hcl --from s3://eddy-checkpoints/<device_id>/

agent {
  device_id = env("EDDY_DEVICE_ID", "gateway-01") # names this device in topics and the S3 prefix
  data_dir  = "/var/lib/eddy"
}

# The site's broker. mosquitto: persistence true, max_inflight_messages 1000,
# max_queued_messages 1000000 (Eddy acks only what is on its disk).
source "mqtt" "sensors" {
  broker = "tcp://127.0.0.1:1883"
  topics = ["sensors/+/telemetry"]
  qos    = 1
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark {
    max_out_of_orderness = "5s"
    idle_timeout         = "1m"
    max_future_skew      = "1m"
  }
}

# The cloud broker, exactly once (QoS 2: mosquitto, EMQX, HiveMQ). Results
# of each checkpoint are published from the write-ahead log after the
# checkpoint completes; while the uplink is down they wait on disk.
sink "mqtt" "cloud" {
  broker    = "ssl://mqtt.example.com:8883"
  client_id = "eddy-${device_id}-cloud"
  topic     = "sites/${device_id}/${pipeline}/${key}"
  delivery  = "exactly_once"
  qos       = 2
  username  = env("EDDY_CLOUD_USER", "")
  password  = env("EDDY_CLOUD_PASSWORD", "")
  buffer {
    max_disk  = "1GiB" # results wait here while the uplink is down
    when_full = "block"
  }
}

sink "file" "late" {
  path = "late.jsonl"
}

pipeline "climate_1m" {
  from   = source.mqtt.sensors
  filter = event.temp != null
  key    = event.device
  window "tumbling" {
    size             = "1m"
    allowed_lateness = "30s"
  }
  aggregate {
    n            = count()
    avg_temp     = avg(event.temp)
    max_temp     = max(event.temp)
    avg_humidity = avg(event.humidity)
  }
  to          = [sink.mqtt.cloud]
  late_output = sink.file.late
}

checkpoint {
  interval = "10s"
  retain   = 3
}

upload "s3" {
  endpoint       = env("EDDY_S3_ENDPOINT", "s3.amazonaws.com")
  bucket         = "eddy-checkpoints"
  prefix         = "${device_id}/"
  region         = env("EDDY_S3_REGION", "eu-central-1")
  access_key     = env("EDDY_S3_ACCESS_KEY", "")
  secret_key     = env("EDDY_S3_SECRET_KEY", "")
  encryption_key = env("EDDY_S3_ENCRYPTION_KEY", "") # 32 bytes hex or base64: encrypted on the device
}
