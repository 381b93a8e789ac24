agent {
  device_id = env("EDDY_DEVICE_ID")
  data_dir  = "/var/lib/eddy"
  admin     = "127.0.0.1:8787"
}
broker {
  listen = "127.0.0.1:1883"
}
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
    max_out_of_orderness = "2s"
    idle_timeout         = "30s"
    max_future_skew      = "1m"
  }
}
sink "mqtt" "cloud" {
  broker   = "ssl://iot.example.com:8883"
  topic    = "sites/${device_id}/${pipeline}/${key}"
  delivery = "exactly_once"
  buffer {
    max_disk  = "512MiB"
    when_full = "block"
  }
}
sink "file" "late" { path = "late.jsonl" }
pipeline "temp_1m" {
  from   = source.mqtt.sensors
  filter = event.temp != null
  key    = event.device
  window "tumbling" {
    size             = "1m"
    allowed_lateness = "10s"
  }
  aggregate {
    avg_temp = avg(event.temp)
    max_temp = max(event.temp)
    n        = count()
  }
  to          = [sink.mqtt.cloud]
  late_output = sink.file.late
}
state {
  backend = "bbolt"
  cache   = "32MiB"
}
checkpoint {
  interval = "10s"
  retain   = 3
}
upload "s3" {
  endpoint = "minio.local:9000"
  bucket   = "eddy"
  prefix   = "${device_id}/"
}
