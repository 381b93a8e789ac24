# Quickstart: an embedded broker, a simulator publishing to it, and one
# event-time pipeline printing per-sensor aggregates of 10-second windows.
#
#   eddy run -c examples/quickstart.hcl
#
# The simulator stamps some readings out of order (up to 1.5 s) and some
# late (30 to 90 s in the past), as real sensors on a flaky network do.
# Windows are cut by the readings' own timestamps (event time), and a window
# fires when the watermark — the newest timestamp seen minus the 2 s of
# out-of-orderness allowed — passes its end: that is the `final` line. A late
# reading within allowed_lateness updates its window again: a `late_update`
# line with the new aggregate. Readings later still go to late.jsonl.

agent {
  data_dir = "./eddy-data"
}

broker {
  listen = "127.0.0.1:18830" # not 1883, to stay clear of a system broker
}

source "simulator" "sim" {
  # publishes {"device":"sensor-3","ts":<ms>,"temp":21.5,"humidity":40.1}
  # to sensors/<sensor>/telemetry on the embedded broker
  devices      = 5
  rate         = 10   # readings per second, all sensors together
  out_of_order = 0.1  # stamped up to 1.5 s in the past
  late         = 0.03 # stamped 30 to 90 s in the past
  watermark {
    max_out_of_orderness = "2s"
  }
}

sink "stdout" "console" {}

sink "file" "late" {
  path = "late.jsonl" # under data_dir
}

pipeline "temp_10s" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" {
    size             = "10s"
    allowed_lateness = "1m"
  }
  aggregate {
    n        = count()
    min_temp = min(event.temp)
    max_temp = max(event.temp)
    avg_temp = avg(event.temp)
  }
  to          = [sink.stdout.console]
  late_output = sink.file.late
}
