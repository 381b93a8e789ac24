# Every block Eddy knows, with its options. Values shown are the defaults
# unless the comment says otherwise. Durations: "500ms", "2s", "1m", "1h", "1d".
# Sizes: "512KiB", "64MiB", "1GiB", "100MB" or a number of bytes.
# env("NAME", "default") and file("path") work in any value.
# ${device_id} and friends in templates are filled in at run time.

agent {
  device_id      = env("EDDY_DEVICE_ID", "gateway-01") # default: /etc/machine-id, else hostname
  data_dir       = "./eddy-data"
  admin          = "127.0.0.1:8787" # beyond loopback needs admin_token
  admin_token    = ""
  log_level      = "info"  # debug | info | warn | error
  log_format     = "text"  # text | json
  max_key_groups = 128     # fixed for the life of the state
  parallelism    = 1       # default keyed subtasks per pipeline
  max_disk       = "8GiB"  # default: 50% of data_dir's file system, at most free + Eddy's own;
                           # ingest, buffer and state bounds below must fit in it
}

# Optional embedded broker for local sensors. Beyond loopback it needs
# username/password or tls.
broker {
  listen       = "127.0.0.1:18830"
  username     = "sensors"
  password     = env("EDDY_BROKER_PASSWORD", "change-me")
  max_inflight = 1000
}

# Readings from an external broker.
source "mqtt" "sensors" {
  broker        = "tcp://127.0.0.1:1883" # tcp://, ssl://, ws://, wss:// or "embedded"
  client_id     = "eddy-${device_id}-sensors"
  topics        = ["sensors/+/telemetry", "lab/#"]
  qos           = 1
  clean_session = false # keep the session so nothing is lost while down
  connections   = 1     # >1: shared subscription over that many connections (more cores; readings may reorder)
  keepalive     = "30s"
  # dedup_key    = "id"  # default unset; a JSON field with the producer's message id: a repeated (topic, id) is dropped
  # dedup_window = "10m" # how long ids are remembered (at most 65,536 of them)
  format        = "json" # json | csv | raw
  reconnect {
    min = "1s"
    max = "1m"
  }
  timestamp {
    field = "ts"
    unit  = "ms" # s | ms | us | ns; or layout = "rfc3339" / a Go layout
  }
  watermark {
    max_out_of_orderness = "2s"
    idle_timeout         = "30s"
    max_future_skew      = "1m"
    hold_after_resume    = "3s" # for brokers that send a resumed session's backlog behind newer messages
  }
}

# Readings from the embedded broker, as CSV with an RFC 3339 time column.
source "mqtt" "local_csv" {
  broker = "embedded"
  topics = ["csv/${device_id}/+"]
  format = "csv"
  csv {
    header    = false
    columns   = ["device", "time", "temp"]
    delimiter = ";"
  }
  timestamp {
    field  = "time"
    layout = "rfc3339"
  }
}

# Replaying a file ("-" reads standard input), one reading per line.
source "file" "replay" {
  path   = "readings.jsonl"
  format = "json"
  timestamp {
    field = "ts"
    unit  = "ms"
  }
}

# Synthetic sensors publishing to the embedded broker.
source "simulator" "sim" {
  broker       = "embedded"
  topic        = "sim/${sensor}/telemetry" # ${sensor} is the only variable
  devices      = 10
  rate         = 20     # readings per second, all devices together
  seed         = 42     # default 0
  out_of_order = 0.1
  late         = 0.01
  malformed    = 0.005
  max_readings = 0      # 0 = unlimited
}

# Results upstream, exactly once through the WAL.
sink "mqtt" "cloud" {
  broker    = "ssl://iot.example.com:8883"
  client_id = "eddy-${device_id}-cloud"
  # ${device_id}, ${pipeline}, ${key}, ${window_start}, ${window_end}
  topic     = "sites/${device_id}/${pipeline}/${key}"
  qos       = 2 # 1 for brokers without QoS 2 (AWS IoT Core, Azure IoT Hub): repeats only of the unacknowledged window, same ids
  retain    = false
  delivery  = "exactly_once" # | at_least_once | at_most_once
  # QoS 2 flows in flight at most; fewer when the broker announces or
  # shows a lower limit (mosquitto: max_inflight_messages, default 20)
  max_inflight = 20
  # at the end of a finite input, wait this long for the WAL to be delivered
  drain_timeout = "30s"
  # cloud-broker limits (AWS IoT Core: "128KiB", 8); default: none
  # max_payload      = "128KiB" # larger results are dead-lettered (too_large), never published
  # max_topic_levels = 8        # eddy validate warns when the topic can have more
  username  = "gateway"
  password  = env("EDDY_CLOUD_PASSWORD", "")
  tls {
    ca = "" # default: the system roots; a PEM bundle, e.g. "/etc/eddy/ca.pem", must exist at start
  }
  buffer {
    max_disk   = "512MiB"
    when_full  = "block" # | drop_oldest
    drain_rate = 0       # most messages published per second (also draining after an outage); 0 = unlimited
  }
}

sink "file" "late" {
  path        = "late.jsonl"
  rotate_size = "64MiB"
  format      = "jsonl"
}

sink "file" "dead" {
  path = "dead-letter.jsonl"
}

sink "stdout" "console" {
  format = "pretty" # | jsonl
}

pipeline "temp_1m" {
  from   = source.mqtt.sensors
  filter = event.temp != null
  map {
    temp_f = event.temp * 9 / 5 + 32
  }
  key         = event.device
  parallelism = 2
  window "tumbling" {
    time             = "event" # default when the source has a timestamp
    size             = "1m"
    offset           = "0s" # in (-size, size): "-8h" on "24h" starts days at midnight UTC+8
    allowed_lateness = "10s"
    early_every      = "15s" # early firings; 0 = none
  }
  aggregate {
    n        = count()
    avg_temp = avg(event.temp)
    max_temp = max(event.temp)
    p95_temp = percentile(event.temp, 0.95)
  }
  to          = [sink.mqtt.cloud, sink.stdout.console]
  late_output = sink.file.late
  dead_letter = sink.file.dead
  # For tests only (both default off): a deliberately slow operator, and a
  # panic injected once per process at one source offset.
  debug_delay_per_record = "0s"
  debug_panic_at_offset  = 0
}

pipeline "humidity_sliding" {
  from = source.file.replay
  key  = event.device
  window "sliding" {
    size  = "10m"
    slide = "1m"
  }
  aggregate {
    median_humidity = median(event.humidity)
    sd              = stddev(event.humidity)
  }
  to = [sink.stdout.console]
}

pipeline "csv_sessions" {
  from = source.mqtt.local_csv
  key  = event.device
  window "session" {
    gap = "5m"
  }
  aggregate {
    first_temp = first(event.temp)
    last_temp  = last(event.temp)
  }
  to = [sink.stdout.console]
}

pipeline "sim_counts" {
  from = source.simulator.sim
  key  = event.device
  window "count" {
    count       = 100
    count_slide = 50
  }
  aggregate {
    var_temp = variance(event.temp)
    sum_temp = sum(event.temp)
  }
  to = [sink.stdout.console]
}

state {
  backend  = "bbolt" # | memory
  cache    = "32MiB"
  max_size = "1GiB"
}

checkpoint {
  interval           = "10s"
  min_pause          = "0s"
  timeout            = "1m"
  tolerable_failures = 3
  retain             = 3
  mode               = "exactly_once" # | at_least_once
  max_chain_ratio    = 1.0 # a new full snapshot once the increments outweigh the last one; 0 = all full
  unaligned          = false # true: barriers overtake queued records, which go into the checkpoint
  aligned_timeout    = "0s"  # switch an aligned checkpoint to unaligned after this long; 0 = never
}

upload "s3" {
  endpoint       = "minio.local:9000"
  bucket         = "eddy"
  prefix         = "${device_id}/"
  region         = "us-east-1"
  access_key     = env("EDDY_S3_ACCESS_KEY", "")
  secret_key     = env("EDDY_S3_SECRET_KEY", "")
  secure         = false # default true
  ca_file        = ""
  path_style     = true
  max_bandwidth  = "1MiB" # per second; 0 = unlimited
  concurrency    = 2
  create_bucket  = true
  encryption_key = "" # 32 bytes hex or base64: AES-256-GCM on the device (README: what it protects)

  # Where credentials come from when access_key is empty. One block; the
  # providers:
  credentials {
    provider = "default" # minio-go's chain: AWS/MinIO env vars, ~/.aws/credentials, ~/.mc/config.json, IAM (web identity, ECS, EC2 IMDSv2)
  }
  # credentials {
  #   provider   = "aws_iot" # AWS IoT Core's credentials provider, by device certificate
  #   endpoint   = "c2abc123.credentials.iot.eu-west-1.amazonaws.com"
  #   role_alias = "eddy-s3-upload"
  #   thing_name = "${device_id}"
  #   cert_file  = "/etc/eddy/device.pem"
  #   key_file   = "/etc/eddy/device.key"
  #   ca_file    = "" # besides the system's CAs
  # }
  # credentials {
  #   provider  = "minio_sts_certificate" # MinIO AssumeRoleWithCertificate, by device certificate
  #   endpoint  = "https://minio.local:9000" # default: the S3 endpoint over https
  #   cert_file = "/etc/eddy/device.pem"
  #   key_file  = "/etc/eddy/device.key"
  #   ca_file   = ""
  #   duration  = "1h"
  # }
}

ingest {
  ack           = "after_fsync" # | after_write
  sync_interval = "100ms"
  max_disk      = "1GiB"
  linger        = "100ms"       # shortest time between two commits (fsyncs) unless 256 messages wait; acks wait for their commit
  compression   = "zstd"        # | none: each batch stored compressed when that makes it smaller
}
