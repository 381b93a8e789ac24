# Every block Eddy knows, with every option (config/fullexample_test.go
# holds it so). Values shown are the defaults
# unless the comment says otherwise. Durations: "500ms", "2s", "1m", "1h", "1d".
# Sizes: "512KiB", "64MiB", "1GiB", "100MB" or a number of bytes.
# env("NAME", "default") and file("path") work in any value.
# ${device_id} and friends in templates are filled in at run time.

agent {
  device_id      = env("EDDY_DEVICE_ID", "gateway-01") # default: /etc/machine-id, else hostname
  data_dir       = "./eddy-data"
  admin          = "127.0.0.1:8787" # beyond loopback needs admin_token
  admin_token    = ""
  admin_hosts    = ["gateway-01.local"] # default none; Host headers answered besides the listen address, localhost and IPs
  log_level      = "info"  # debug | info | warn | error
  log_format     = "text"  # text | json
  max_key_groups = 128     # fixed for the life of the state
  parallelism    = 1       # default keyed subtasks per pipeline
  max_disk       = "8GiB"  # default: 50% of data_dir's file system, at most free + Eddy's own;
                           # ingest, buffer and state bounds below must fit in it
  memory_limit   = "256MiB" # Go's soft limit; default: a quarter of the RAM or cgroup limit, at most 256MiB
  # HTTPS on the admin endpoint; the files must exist (eddy validate reads them):
  # admin_tls {
  #   cert      = "/etc/eddy/admin.pem"
  #   key       = "/etc/eddy/admin.key"
  #   client_ca = "/etc/eddy/ca.pem" # default none; when set, clients need a certificate it signed
  # }
}

# Optional embedded broker for local sensors. Beyond loopback it needs
# username/password or tls.
broker {
  listen       = "127.0.0.1:18830"
  username     = "sensors"
  password     = env("EDDY_BROKER_PASSWORD", "change-me")
  max_inflight = 1000
  max_message_size        = "256KiB" # larger publishes disconnect the client
  max_clients             = 1000
  max_messages_per_second = 500 # per client connection, delayed beyond it; default 0 = unlimited
  max_messages_burst      = 1000 # publishes at once after idling; default: the rate
  # What a client may publish and subscribe to; without any acl, everything
  # but $SYS. Repeatable.
  acl {
    user    = "*" # the MQTT username (or certificate CN with tls { ca }); "*": everyone else
    publish = ["sensors/${username}/#", "csv/${device_id}/+", "sim/+/telemetry", "control/#"]
    # default none: may not subscribe; $SYS only when named
    subscribe = ["control/${username}/#"]
  }
  # TLS listener; the files must exist (eddy validate reads them):
  # tls {
  #   cert = "/etc/eddy/broker.pem"
  #   key  = "/etc/eddy/broker.key"
  #   ca   = "/etc/eddy/ca.pem" # default none; when set, client certificates are required
  # }
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
  username      = "eddy" # default none (both or neither)
  password      = env("EDDY_SENSORS_PASSWORD", "")
  dedup_key     = "id"  # default unset; a JSON field with the producer's message id: a repeated (topic, id) is dropped
  dedup_window  = "10m" # how long ids are remembered (at most 65,536 of them)
  max_message_size = "256KiB" # larger messages are dead-lettered (too_large)
  max_inflight  = 1000  # unacknowledged QoS 1/2 messages the broker may send at once
  protocol_version = 5     # MQTT 5 (default; falls back to 3.1.1 when the broker refuses it) or 4
  receive_maximum  = 1000  # MQTT 5: the most unacknowledged messages the broker may send (about one ingest commit)
  session_expiry   = "7d"  # MQTT 5: the broker drops the session this long after a disconnect; default never
  format        = "json" # json | csv | raw
  tls {
    ca                   = "" # default: the system roots; a PEM bundle must exist at start
    cert                 = "" # client certificate and key, both or neither
    key                  = ""
    insecure_skip_verify = false # tests only
  }
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

# A low-rate control stream (thresholds pushed from the cloud), read as
# control.* by pipelines that name it in control.
source "mqtt" "thresholds" {
  broker = "embedded"
  topics = ["control/${device_id}/thresholds"]
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

# Sparkplug B edge nodes: each metric of their births, data and deaths is
# one reading (event.node, event.device, event.metric, event.value, …),
# stamped with the metric's timestamp; aliases are resolved from the births.
source "mqtt" "scada" {
  broker          = "tcp://127.0.0.1:1883"
  topics          = ["spBv1.0/plant1/#"]
  format          = "sparkplug_b"
  request_rebirth = true # answer data it cannot read (before birth, seq gap) with an NCMD rebirth
}

# Replaying a file ("-" reads standard input), one reading per line.
source "file" "replay" {
  path   = "readings.jsonl"
  format = "json"
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark {
    max_out_of_orderness = "5s" # default 0s
    idle_timeout         = "0s" # never idle
    max_future_skew      = "0s" # 0 = no bound
  }
}

# A CSV replay whose watermark comes from marker lines, not from the
# readings' times.
source "file" "replay_csv" {
  path   = "readings.csv"
  format = "csv"
  csv {
    header    = true # column names from the first line
    columns   = []   # or name them here
    delimiter = ","
  }
  timestamp {
    field  = "time"
    layout = "2006-01-02 15:04:05" # a Go layout, or "rfc3339"
  }
  watermark {
    punctuation = "wm" # a line with wm set moves event time to it
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
  protocol_version = 5  # MQTT 5 (default; each reading carries the user property "sensor") or 4
  watermark {
    max_out_of_orderness = "1s" # default 0s
  }
}

# Results upstream, exactly once through the WAL.
sink "mqtt" "cloud" {
  broker    = "ssl://iot.example.com:8883"
  client_id = "eddy-${device_id}-cloud"
  # ${device_id}, ${pipeline}, ${key}, ${window_start}, ${window_end};
  # ${key} may add levels (a key with "/"), which max_topic_levels warns of
  topic     = "sites/${device_id}/${pipeline}"
  qos       = 2 # 1 for brokers without QoS 2 (AWS IoT Core, Azure IoT Hub): repeats only of the unacknowledged window, same ids
  retain    = false
  delivery  = "exactly_once" # | at_least_once | at_most_once
  # 5: MQTT 5 (default; 3.1.1 for the run if the broker refuses it) | 4: MQTT 3.1.1
  protocol_version = 5
  # optional: results that waited longer in the WAL are dead-lettered (expired);
  # at MQTT 5 the others carry the expiry left
  message_expiry = "1h"
  # optional, MQTT 5: the broker drops the session this long after a disconnect (default: never)
  session_expiry = "720h"
  # QoS 2 flows in flight at most; fewer when the broker announces or
  # shows a lower limit (mosquitto: max_inflight_messages, default 20)
  max_inflight = 20
  # at the end of a finite input, wait this long for the WAL to be delivered
  drain_timeout = "30s"
  # cloud-broker limits (AWS IoT Core: "128KiB", 8); default: none
  max_payload      = "128KiB" # larger results are dead-lettered (too_large), never published
  max_topic_levels = 8        # eddy validate warns when the topic can have more
  username  = "gateway"
  password  = env("EDDY_CLOUD_PASSWORD", "")
  tls {
    ca                   = "" # default: the system roots; a PEM bundle, e.g. "/etc/eddy/ca.pem", must exist at start
    cert                 = "" # client certificate and key, both or neither
    key                  = ""
    insecure_skip_verify = false # tests only
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
  delivery    = "at_least_once" # | exactly_once: path is a directory of one part file per checkpoint
}

sink "file" "parts" {
  path     = "signals"
  delivery = "exactly_once"
  rotate { # exactly_once only: which committed parts to keep
    max_files = 1000 # default: all
    max_age   = "7d" # default: forever
  }
}

sink "file" "dead" {
  path = "dead-letter.jsonl"
}

# Results as a Sparkplug B edge node (docs/upstream.md#sparkplug-b): each
# key is a device, each aggregate a metric (Int64 for count(), else Double); births, deaths and seq
# as the specification says. Data is QoS 0, as Sparkplug requires. One
# pipeline with a window per Sparkplug sink.
sink "sparkplug" "scada" {
  broker          = "ssl://scada.example.com:8883"
  group_id        = "plant1"
  edge_node_id    = "${device_id}" # the default
  primary_host_id = "scada-1" # default none: births as soon as connected
  client_id       = "eddy-${device_id}-scada"
  protocol_version = 5 # the default: MQTT 5, 3.1.1 when the broker refuses it; 4 = MQTT 3.1.1
  max_devices     = 10000 # the default: results of further keys are not published, counted
  username        = "gateway"
  password        = env("EDDY_SCADA_PASSWORD", "")
  tls {
    ca = "" # default: the system roots
  }
  # Results kept while the broker or the primary host is away, on disk
  # (data_dir/sparkplug/scada.wal) across restarts, published after the
  # next births as historical.
  buffer {
    max_disk  = "512MiB" # the default
    when_full = "drop_oldest" # the only choice: the oldest are dropped, counted
  }
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
  max_keys    = 10000 # default 0 = unlimited; keys holding window state, a reading of one more is dead-lettered (key_limit)
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
  to          = [sink.mqtt.cloud, sink.sparkplug.scada, sink.stdout.console]
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

# Per Sparkplug device and metric: mean of 1-minute windows, on fresh
# readings only (a dead node's last values come stale).
pipeline "scada_means" {
  from   = source.mqtt.scada
  filter = !event.stale && event.value != null
  key    = "${event.node}/${event.device}/${event.metric}"
  window "tumbling" { size = "1m" }
  aggregate {
    mean = avg(event.value)
  }
  to = [sink.stdout.console]
}

pipeline "csv_replay_total" {
  from = source.file.replay_csv
  key  = event.device
  window "global" {
    trigger_count = 1000 # default none; fire every 1000 readings
  }
  aggregate {
    n = count()
  }
  to = [sink.stdout.console]
}

# Per-key blocks instead of a window: readings one by one, records of their
# own. Blocks run in the order written, dedup first.
pipeline "temp_signals" {
  from      = source.mqtt.sensors
  control   = source.mqtt.thresholds # default none; its JSON messages are control.* in expressions
  key       = event.device
  state_ttl = "24h"        # a key's state is dropped this long after its last reading; default: kept
  order     = "event_time" # | arrival; default event_time with a source timestamp
  dedup {
    id     = event.msg_id # a null id is not deduplicated
    within = "1h"
  }
  report_by_exception {
    value     = event.temp
    deadband  = 0.5   # default 0: every change
    heartbeat = "10m" # default none
    time      = "event" # | processing: the agent's clock repeats the last value when silent
  }
  alarm "hot" {
    raise        = event.temp > (control.max_temp != null ? control.max_temp : 80)
    clear        = event.temp < 70 # default: !raise; a second threshold gives hysteresis
    min_duration = "30s"           # default 0: at once
  }
  absence {
    timeout = "5m"
    time    = "event" # | processing (default): counted on the agent's clock from each arrival
  }
  to          = [sink.file.parts]
  late_output = sink.file.late
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
  backend          = "bbolt" # | memory
  cache            = "32MiB"
  max_size         = "1GiB"
  read_checkpoints = true # misses read from the checkpoint files; false: a whole copy in the store file
}

checkpoint {
  interval           = "10s"
  min_pause          = "0s"
  timeout            = "1m"
  tolerable_failures = 3
  retain             = 3
  mode               = "exactly_once" # | at_least_once
  max_savepoints     = 10
  max_chain_ratio    = 1.0 # a new full snapshot once the increments outweigh the last one; 0 = all full
  # full_every       = 10  # deprecated (warns): caps the chain by count; max_chain_ratio replaces it
  unaligned          = false # true: barriers overtake queued records, which go into the checkpoint
  aligned_timeout    = "0s"  # switch an aligned checkpoint to unaligned after this long; 0 = never
  debug_always_merge = false # tests only
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

# What the agent does when a pipeline fails.
restart {
  strategy                  = "exponential_delay" # | fixed_delay | failure_rate | none
  initial_backoff           = "1s"  # exponential_delay
  max_backoff               = "5m"
  backoff_multiplier        = 2
  jitter_factor             = 0.1
  reset_backoff_threshold   = "1h"
  attempts                  = 3     # fixed_delay
  delay                     = "10s" # fixed_delay and failure_rate
  max_failures_per_interval = 3     # failure_rate
  failure_rate_interval     = "5m"
}
