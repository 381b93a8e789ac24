# Backfill: replay a file of readings recorded while the device was offline
# (or exported from another system) through event-time windows, and deliver
# the results upstream exactly once.
#
# Event time makes a replay give the same windows as the live run would have:
# windows are cut by each reading's timestamp, and the watermark is driven
# by the data, not by the clock, so an hour of readings replays in a second.
# At the end of the file every window fires, the final checkpoint commits
# the last results, and eddy waits (up to drain_timeout) until the upstream
# broker has every one of them before it exits. A second run of the same
# file restores the finished checkpoint and sends nothing twice; each result
# also carries a deterministic id for consumers that deduplicate.
#
# Try it from the repository's top against a local mosquitto (persistence true):
#
#   mosquitto_sub -t 'backfill/#' -q 2 -v &
#   eddy run -c examples/backfill.hcl

agent {
  data_dir = "./eddy-data/backfill"
  admin    = "127.0.0.1:0"
}

source "file" "history" {
  path   = "examples/data/temps.jsonl" # one JSON reading per line; "-" reads standard input
  format = "json"
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark {
    max_out_of_orderness = "5s"
  }
}

sink "mqtt" "upstream" {
  broker   = "tcp://127.0.0.1:1883"
  topic    = "backfill/${device_id}/${pipeline}/${key}"
  delivery = "exactly_once"
  qos      = 2
}

pipeline "temp_5m" {
  from = source.file.history
  key  = event.device
  window "tumbling" {
    size = "5m"
  }
  aggregate {
    n        = count()
    avg_temp = avg(event.temp)
    min_temp = min(event.temp)
    max_temp = max(event.temp)
  }
  to = [sink.mqtt.upstream]
}
