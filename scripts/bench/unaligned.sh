#!/usr/bin/env bash
# Checkpoint duration and size, aligned against unaligned, under the same
# backpressure: a file of readings through a deliberately slow window
# operator (debug_delay_per_record, a test-only knob), so the queues in front
# of it stay full. Each mode runs the same job to its end; the final
# checkpoint (taken after the queues drained) is left out. ~1-2 min.
#   scripts/bench/unaligned.sh [readings_per_device=40] [delay=1ms] [runs=2]
# Prints a Markdown table on stdout (progress on stderr).
set -euo pipefail
cd "$(dirname "$0")/../.."
per_device=${1:-40}
delay=${2:-1ms}
runs=${3:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/eddy" .
# 1,000 devices, one reading per device per second, up to 4 s out of order.
awk -v n="$per_device" 'BEGIN { srand(11); base = 1700000000000;
  for (i = 0; i < n; i++) for (d = 0; d < 1000; d++)
    printf "{\"device\":\"dev-%d\",\"ts\":%d,\"v\":%d}\n", d, base + i*1000 + int(rand()*4000), int(rand()*1000) }' >"$work/in.jsonl"

config() { # mode-block data-dir
  cat <<HCL
agent {
  device_id   = "bench"
  data_dir    = "$2"
  admin       = ""
  parallelism = 2
}
source "file" "in" {
  path = "$work/in.jsonl"
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark { max_out_of_orderness = "5s" }
}
sink "file" "out" {
  path     = "$2/out"
  delivery = "exactly_once"
}
pipeline "sums" {
  from = source.file.in
  key  = event.device
  window "tumbling" { size = "10s" }
  aggregate {
    n   = count()
    sum = sum(event.v)
    max = max(event.v)
  }
  to                     = [sink.file.out]
  debug_delay_per_record = "$delay"
}
checkpoint {
  interval = "3s"
  timeout  = "1m"
  $1
}
HCL
}

echo "| mode | checkpoints | duration min / median / max | bytes written per checkpoint (median) | in-flight records (median) |"
echo "|---|---|---|---|---|"
for mode in "aligned|" "unaligned|unaligned = true" "aligned_timeout 500ms|aligned_timeout = \"500ms\""; do
  name=${mode%%|*}
  block=${mode#*|}
  : >"$work/lines"
  for r in $(seq 1 "$runs"); do
    echo "# $name, run $r" >&2
    rm -rf "$work/data"
    config "$block" "$work/data" >"$work/agent.hcl"
    "$work/eddy" run -c "$work/agent.hcl" 2>"$work/log"
    # All completed checkpoints but the last (the final one, after the
    # queues drained).
    grep 'checkpoint completed' "$work/log" | sed '$d' >>"$work/lines" || true
  done
  awk -v name="$name" '
    function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t } return n ? a[int((n + 1) / 2)] : 0 }
    { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      n++; d[n] = v["duration_ms"]; b[n] = v["bytes"]; f[n] = v["inflight_records"] }
    END { if (!n) { printf "| %s | 0 | - | - | - |\n", name; exit }
      md = med(d, n); lo = d[1]; hi = d[n]
      printf "| %s | %d | %d / %d / %d ms | %.2f MiB | %d |\n", name, n, lo, md, hi, med(b, n) / 1048576, med(f, n) }' "$work/lines"
done
echo
echo "$(nproc) CPUs, $(go env GOVERSION), $(date -u +%F), commit $(git rev-parse --short HEAD); 1,000 devices × $per_device readings, delay $delay per record, parallelism 2, interval 3 s, $runs runs per mode"
