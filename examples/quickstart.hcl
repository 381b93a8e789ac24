# Quickstart: an embedded broker, a simulator publishing to it, and one
# pipeline printing per-sensor aggregates every 5 seconds.
#
#   eddy run -c examples/quickstart.hcl

agent {
  data_dir = "./eddy-data"
}

broker {
  listen = "127.0.0.1:18830" # not 1883, to stay clear of a system broker
}

source "simulator" "sim" {
  # publishes {"device":"sensor-3","ts":<ms>,"temp":21.5,"humidity":40.1}
  # to sensors/<sensor>/telemetry on the embedded broker
  devices = 5
  rate    = 10
}

sink "stdout" "console" {}

pipeline "temp_1m" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "5s"
  }
  aggregate {
    n        = count()
    sum_temp = sum(event.temp)
    min_temp = min(event.temp)
    max_temp = max(event.temp)
    avg_temp = avg(event.temp)
  }
  to = [sink.stdout.console]
}
