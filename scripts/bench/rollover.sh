#!/usr/bin/env bash
# How long a changed pipeline's old definition lives after the restart
# (until its last window is past its allowed lateness), and the memory the
# rollover costs while both definitions run (~2 min).
#
# For each allowed lateness: runs the simulator (200 readings/s, 200
# sensors, event time, watermark bound 2 s) into a 10 s tumbling window for
# 20 s, stops the agent (SIGTERM: a final checkpoint), adds an aggregate and
# starts it again. It reports the time from "eddy started" to the old
# definition's "retires" line, and the agent's resident memory (VmRSS,
# sampled every 200 ms) while both run against a run of the same new
# configuration with no rollover, sampled over the same span after start.
# Prints a Markdown table on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/eddy" .

config() { # lateness aggregates-extra data-dir port
  cat <<EOF
agent {
  data_dir  = "$3"
  admin     = ""
  log_level = "info"
}
broker { listen = "127.0.0.1:$4" }
source "simulator" "sim" {
  devices      = 200
  rate         = 200
  out_of_order = 0.1
  late         = 0
  malformed    = 0
  watermark { max_out_of_orderness = "2s" }
}
sink "file" "out" {
  path     = "$3/../out"
  delivery = "exactly_once"
}
pipeline "temp_10s" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" {
    size             = "10s"
    allowed_lateness = "$1"
  }
  aggregate {
    n        = count()
    avg_temp = avg(event.temp)
    $2
  }
  to = [sink.file.out]
}
EOF
}

# rss_peak PID SECONDS: the largest VmRSS (KiB) over SECONDS.
rss_peak() {
  local pid=$1 until=$((SECONDS + $2)) peak=0 v
  while ((SECONDS < until)) && kill -0 "$pid" 2>/dev/null; do
    v=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    ((v > peak)) && peak=$v
    sleep 0.2
  done
  echo "$peak"
}

# wait_line FILE TEXT: until FILE holds TEXT (at most 120 s).
wait_line() {
  for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.2; done
  echo "timeout waiting for $2 in $1" >&2
  return 1
}

echo "| allowed_lateness | old definition lives (measured) | window size + lateness + bound | RSS peak with both definitions | RSS peak, new definition alone | cost |"
echo "|---|---|---|---|---|---|"
port=18931
for late in 0s 10s 30s; do
  port=$((port + 1))
  d="$work/$late"
  mkdir -p "$d/a" "$d/b"
  config "$late" "" "$d/a/data" "$port" >"$d/old.hcl"
  config "$late" "max_temp = max(event.temp)" "$d/a/data" "$port" >"$d/new.hcl"
  config "$late" "max_temp = max(event.temp)" "$d/b/data" "$port" >"$d/alone.hcl"

  "$work/eddy" run -c "$d/old.hcl" >"$d/old.log" 2>&1 &
  pid=$!
  wait_line "$d/old.log" "checkpoint completed"
  sleep 20
  kill -TERM "$pid"
  wait "$pid" || true

  "$work/eddy" run -c "$d/new.hcl" >"$d/new.log" 2>&1 &
  pid=$!
  wait_line "$d/new.log" "eddy started"
  peak_both=$(rss_peak "$pid" 8)
  wait_line "$d/new.log" "retires"
  kill -TERM "$pid"
  wait "$pid" || true
  # Log timestamps decide; the sampling above only delays the reading.
  started=$(grep -m1 "eddy started" "$d/new.log" | sed -E 's/^time=([^ ]+).*/\1/')
  retired=$(grep -m1 "retires" "$d/new.log" | sed -E 's/^time=([^ ]+).*/\1/')
  lived=$(python3 -c "import datetime as d,sys;f=lambda s:d.datetime.fromisoformat(s.replace('Z','+00:00'));print(round((f(sys.argv[2])-f(sys.argv[1])).total_seconds(),1))" "$started" "$retired")

  "$work/eddy" run -c "$d/alone.hcl" >"$d/alone.log" 2>&1 &
  pid=$!
  wait_line "$d/alone.log" "eddy started"
  peak_alone=$(rss_peak "$pid" 8)
  kill -TERM "$pid"
  wait "$pid" || true

  lat=${late%s}
  mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
  echo "| $late | ${lived} s | ≤ $((10 + lat + 2)) s | $(mib "$peak_both") | $(mib "$peak_alone") | $(mib $((peak_both - peak_alone))) |"
done
