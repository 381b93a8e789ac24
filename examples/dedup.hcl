# Dedup: drop a reading the producer sent twice. A meter publishing at QoS 1
# resends a message whose acknowledgement it lost; the resent copy has the
# same msg_id, and Eddy drops it before it reaches anything downstream (and
# counts it in eddy_readings_duplicate_total).
#
# Try it from the repository's top (replays examples/data/resent.jsonl, where
# message m-3 comes twice, and prints every reading that passes):
#
#   eddy run -c examples/dedup.hcl
#
# Six readings come out, m-1 to m-6, each once. A window after dedup would
# count and sum each reading once likewise.

agent {
  data_dir = "./eddy-data/dedup"
  admin    = "127.0.0.1:0"
}

source "file" "meters" {
  path   = "examples/data/resent.jsonl"
  format = "json"
  timestamp {
    field = "ts"
    unit  = "ms"
  }
}

sink "stdout" "console" {
  format = "jsonl"
}

pipeline "meter_readings" {
  from = source.file.meters
  key  = event.device
  dedup {
    id     = event.msg_id # a reading without msg_id is never dropped
    within = "1h"         # how long an id is remembered after it passed
  }
  map {
    msg_id = event.msg_id
    kwh    = event.kwh
  }
  to = [sink.stdout.console]
}
