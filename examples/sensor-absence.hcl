# Absence of a sensor: a record when a sensor sent nothing for two minutes,
# and another when it sends again, with how long it was quiet.
#
# Try it from the repository's top (replays examples/data/quiet.jsonl: two
# sensors every 30 s, sensor-2 quiet for four and a half minutes):
#
#   eddy run -c examples/sensor-absence.hcl
#
# sensor-2 is reported silent two minutes after its last reading, and
# resumed at its next. The replay counts on the readings' times (time =
# "event"), so sensor-1's readings move time on; on a live broker leave
# time out: the agent's clock then counts, and a sensor is reported silent
# even when no sensor sends. The end of the file makes every sensor silent.

agent {
  data_dir = "./eddy-data/sensor-absence"
  admin    = "127.0.0.1:0"
}

source "file" "readings" {
  path   = "examples/data/quiet.jsonl"
  format = "json"
  timestamp {
    field = "ts"
    unit  = "ms"
  }
}

sink "stdout" "console" {
  format = "jsonl"
}

pipeline "offline" {
  from = source.file.readings
  key  = event.device
  absence {
    timeout = "2m"
    time    = "event"
  }
  to = [sink.stdout.console]
}
