# The agent as a Sparkplug B edge node for a SCADA system or historian
# (Ignition, HiveMQ's or EMQX's Sparkplug tooling, MQTT Explorer).
#
#   sensors ──▶ embedded broker ──▶ 1-minute windows per machine ──▶ Sparkplug B ──▶ SCADA broker
#
#   EDDY_SCADA_BROKER=tcp://scada.plant.local:1883 eddy run -c sparkplug.hcl
#
# What the SCADA side sees: edge node spBv1.0/plant1/NBIRTH/<device_id>
# with bdSeq and Node Control/Rebirth; one device per machine (the
# pipeline's key), born with a DBIRTH whose metrics are the aggregates
# below (readings an Int64, the rest Double; with aliases); then a DDATA per window, stamped with the
# window's end. A host that sees a gap in seq, or wants the current values,
# writes Node Control/Rebirth = true in an NCMD and gets the births again.
# Data is QoS 0, as Sparkplug requires: docs/upstream.md#sparkplug-b says
# what is and is not exactly once here.

agent {
  device_id = env("EDDY_DEVICE_ID", "gateway-01") # the edge node's id
  data_dir  = "./eddy-data"                       # keeps bdSeq across restarts
}

broker {
  listen = "127.0.0.1:1883"
}

source "mqtt" "machines" {
  broker = "embedded"
  topics = ["machines/+/telemetry"]
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark { max_out_of_orderness = "2s" }
}

sink "sparkplug" "scada" {
  broker   = env("EDDY_SCADA_BROKER", "tcp://127.0.0.1:1884")
  group_id = "plant1"
  # The births wait until this host application's STATE says online.
  primary_host_id = "scada-1"
}

pipeline "machine_1m" {
  from = source.mqtt.machines
  key  = event.machine
  window "tumbling" { size = "1m" }
  aggregate {
    readings   = count()
    avg_temp   = avg(event.temp)
    max_temp   = max(event.temp)
    avg_spindle_rpm = avg(event.rpm)
  }
  to = [sink.sparkplug.scada]
}
