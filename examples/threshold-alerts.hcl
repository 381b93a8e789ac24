# Threshold alerts with thresholds pushed at run time.
#
# Sensors publish readings to the embedded broker; the cloud (or you) pushes
# per-sensor thresholds as JSON to a control topic, e.g.
#   {"threshold": {"sensor-1": 22.5, "sensor-4": 19}}
# Each control message is merged into the pipeline's control state (JSON
# Merge Patch: null deletes a key), which is checkpointed with the windows.
# The pipeline keeps readings above their sensor's threshold (22 °C when none
# is set) and reports, per sensor and 10 seconds of event time, how many
# there were and the highest: one alert record per sensor and window, not one
# per reading.
#
# Try it (a simulator publishes to the embedded broker; Ctrl-C stops it):
#
#   eddy run -c examples/threshold-alerts.hcl
#
# and, while it runs, lower sensor-1's threshold with any MQTT client:
#
#   mosquitto_pub -p 18831 -t control/thresholds -m '{"threshold":{"sensor-1":20}}'

agent {
  data_dir = "./eddy-data/threshold-alerts"
  admin    = "127.0.0.1:0"
}

broker {
  listen = "127.0.0.1:18831"
}

source "simulator" "sim" {
  devices = 5
  rate    = 20
  watermark {
    max_out_of_orderness = "2s"
  }
}

source "mqtt" "thresholds" {
  broker = "embedded"
  topics = ["control/thresholds"]
}

sink "stdout" "alerts" {}

pipeline "hot_10s" {
  from    = source.simulator.sim
  control = source.mqtt.thresholds
  filter  = event.temp > coalesce(control.threshold[event.device], 22)
  key     = event.device
  window "tumbling" {
    size = "10s"
  }
  aggregate {
    readings_over = count()
    max_temp      = max(event.temp)
  }
  to = [sink.stdout.alerts]
}
