# Two pipelines on one device that fail and recover independently.
#
# Pipelines that share no source and no sink form separate failover regions:
# when one fails (its state store is full, a sink cannot write, a stage
# panics), only its region restarts from the last checkpoint — its state,
# watermark and source position restored — while the other keeps running.
# The restart block is Flink's restart strategy, applied per region.
#
# Here the temperature pipeline reads the simulator's readings directly and
# prints them; the humidity pipeline subscribes to the same readings on the
# embedded broker and writes exactly-once files: two regions. Restarts are
# logged ("pipelines failed: restarting from the last checkpoint", naming
# the region's pipelines) and counted in eddy_pipeline_restarts_total.
#
# Try it (Ctrl-C stops it; eddy-data/failover-regions/humidity/ fills with
# part files, one per checkpoint):
#
#   eddy run -c examples/failover-regions.hcl
#   curl -s 127.0.0.1:8788/metrics | grep eddy_pipeline_restarts_total

agent {
  data_dir = "./eddy-data/failover-regions"
  admin    = "127.0.0.1:8788"
}

broker {
  listen = "127.0.0.1:18832"
}

source "simulator" "sim" {
  devices = 5
  rate    = 20
  watermark {
    max_out_of_orderness = "2s"
  }
}

source "mqtt" "readings" {
  broker = "embedded"
  topics = ["sensors/+/telemetry"]
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark {
    max_out_of_orderness = "2s"
  }
}

sink "stdout" "console" {}

sink "file" "humidity" {
  path     = "humidity"
  delivery = "exactly_once"
}

pipeline "temp_10s" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" {
    size = "10s"
  }
  aggregate {
    avg_temp = avg(event.temp)
  }
  to = [sink.stdout.console]
}

pipeline "humidity_1m" {
  from = source.mqtt.readings
  key  = event.device
  window "sliding" {
    size  = "1m"
    slide = "10s"
  }
  aggregate {
    avg_humidity = avg(event.humidity)
    max_humidity = max(event.humidity)
  }
  to = [sink.file.humidity]
}

# Per region: back off 1 s, 2 s, 4 s … up to a minute between restarts, and
# never give up (systemd restarts the process only if a region gives up).
restart {
  strategy        = "exponential_delay"
  initial_backoff = "1s"
  max_backoff     = "1m"
}

checkpoint {
  interval = "5s"
}
