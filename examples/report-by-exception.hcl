# Report by exception with a heartbeat: send a sensor's temperature only
# when it moved half a degree from the last value sent, and at least once a
# minute while it holds steady, so the uplink carries changes, and silence
# upstream still means "unchanged", not "gone".
#
# Try it from the repository's top (replays examples/data/steady.jsonl, a
# reading every 10 s, and prints each record sent):
#
#   eddy run -c examples/report-by-exception.hcl
#
# Of 16 readings four are sent: the first; the one a minute later, within
# the deadband (the heartbeat); the jump to 23 °C; and the heartbeat a
# minute after it.

agent {
  data_dir = "./eddy-data/report-by-exception"
  admin    = "127.0.0.1:0"
}

source "file" "readings" {
  path   = "examples/data/steady.jsonl"
  format = "json"
  timestamp {
    field = "ts"
    unit  = "ms"
  }
}

sink "stdout" "console" {
  format = "jsonl"
}

pipeline "temp_changes" {
  from = source.file.readings
  key  = event.device
  report_by_exception {
    value     = event.temp
    deadband  = 0.5   # °C
    heartbeat = "1m"  # on the readings' times: a reading a minute after the last one sent goes out
  }
  to = [sink.stdout.console]
}
