# An alarm with hysteresis: raise when a boiler is above 80 °C, clear only
# once it is back below 70 °C. Between the two thresholds the alarm keeps
# its state, so a temperature wavering around 80 raises it once, not on
# every crossing.
#
# Try it from the repository's top (replays examples/data/boiler.jsonl and
# prints the alarm's records):
#
#   eddy run -c examples/hysteresis-alarm.hcl
#
# The boiler goes 74, 78, 81 (raised), 84, 79, 76, 72, 71: below 80 but not
# below 70, so still raised; 69 (cleared, with how long it lasted); then 66,
# 73, 79, 82 (raised again), 77.

agent {
  data_dir = "./eddy-data/hysteresis-alarm"
  admin    = "127.0.0.1:0"
}

source "file" "boiler" {
  path   = "examples/data/boiler.jsonl"
  format = "json"
  timestamp {
    field = "ts"
    unit  = "ms"
  }
}

sink "stdout" "console" {
  format = "jsonl"
}

pipeline "boiler_alarm" {
  from = source.file.boiler
  key  = event.device
  alarm "overheat" {
    raise = event.temp > 80
    clear = event.temp < 70 # without clear, the alarm would clear as soon as raise is false
  }
  map {
    temp = event.temp # the reading that raised or cleared it
  }
  to = [sink.stdout.console]
}
