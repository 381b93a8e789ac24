# The agent reading Sparkplug B edge nodes, as a host application does:
# every metric of their births and data becomes a reading, aggregated per
# device and metric.
#
#   edge nodes ──▶ plant broker ──▶ spBv1.0/plant1/# ──▶ 1-minute windows per device and metric ──▶ stdout
#
#   EDDY_PLANT_BROKER=tcp://plant.local:1883 eddy run -c sparkplug-host.hcl
#
# Each reading carries event.group, event.node, event.device ("" for a
# node's own metrics), event.metric (the name, also for data sent by
# alias: aliases are read from the births and kept in the checkpoints),
# event.value, event.datatype, event.timestamp (its event time),
# event.is_historical and event.stale. A node's or device's death
# (NDEATH, DDEATH) sends each of its metrics' last value once more with
# stale = true. Data the agent cannot read — before its birth, after a
# gap in seq — is dead-lettered with its reason, and with request_rebirth
# answered with an NCMD that asks the node for its births.

agent {
  device_id = env("EDDY_DEVICE_ID", "host-01")
  data_dir  = "./eddy-data"
}

source "mqtt" "plant" {
  broker          = env("EDDY_PLANT_BROKER", "tcp://127.0.0.1:1883")
  topics          = ["spBv1.0/plant1/#"]
  format          = "sparkplug_b"
  request_rebirth = true
  watermark { max_out_of_orderness = "5s" }
}

sink "stdout" "console" {}

sink "file" "dead" {
  path = "sparkplug-dead.jsonl"
}

# Live numeric values only: stale values and historical data sent after
# an outage (is_historical, older than the watermark) stay out.
pipeline "metric_1m" {
  from   = source.mqtt.plant
  filter = !event.stale && !event.is_historical && (event.datatype == "Double" || event.datatype == "Float" || event.datatype == "Int32")
  key    = "${event.node}/${event.device}/${event.metric}"
  window "tumbling" { size = "1m" }
  aggregate {
    n    = count()
    mean = avg(event.value)
    max  = max(event.value)
  }
  to          = [sink.stdout.console]
  dead_letter = sink.file.dead
}

# Each metric's last value when its node or device died, as it happens.
pipeline "went_stale" {
  from   = source.mqtt.plant
  filter = event.stale
  to     = [sink.stdout.console]
}
