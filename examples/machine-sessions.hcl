# Machine sessions: how long each machine ran, from its state messages.
#
# Machines publish {"machine":"press-2","ts":<ms>,"state":"RUN","parts":12}
# while they work; a pause of more than 5 minutes ends a session. One
# session window per machine gives each run's start, end, message count and
# parts made — Flink's session windows: windows of [ts, ts + gap) that merge
# while they overlap or touch, so a session ends 5 minutes after its last
# RUN message (window_end).
#
# Try it from the repository's top (replays examples/data/machines.jsonl and
# prints each session):
#
#   eddy run -c examples/machine-sessions.hcl
#
# On a device, read the state topic instead of the file:
#
#   source "mqtt" "machines" {
#     broker = "tcp://127.0.0.1:1883"
#     topics = ["factory/+/state"]
#     ...same timestamp block...
#   }

agent {
  data_dir = "./eddy-data/machine-sessions"
  admin    = "127.0.0.1:0"
}

source "file" "machines" {
  path   = "examples/data/machines.jsonl" # relative to the working directory
  format = "json"
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark {
    max_out_of_orderness = "10s"
  }
}

sink "stdout" "console" {}

pipeline "machine_runs" {
  from   = source.file.machines
  filter = event.state == "RUN"
  key    = event.machine
  window "session" {
    gap = "5m"
  }
  aggregate {
    messages = count()
    parts    = sum(event.parts)
  }
  to = [sink.stdout.console]
}
